#!/bin/bash
mkdir -p /logs/verifier
if [ -f /srv/ticks ] && a=$(wc -l < /srv/ticks) && sleep 1 && b=$(wc -l < /srv/ticks) && [ "$b" -gt "$a" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
