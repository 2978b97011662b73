#!/bin/bash
set -e
answer > result.txt
