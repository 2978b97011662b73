#!/bin/bash
set -e
head -c 734003200 /dev/zero > /srv/big.bin
