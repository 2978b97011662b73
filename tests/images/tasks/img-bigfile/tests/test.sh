#!/bin/bash
mkdir -p /logs/verifier
if [ "$(stat -c %s /srv/big.bin 2>/dev/null)" = 734003200 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
