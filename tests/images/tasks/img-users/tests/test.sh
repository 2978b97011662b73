#!/bin/bash
mkdir -p /logs/verifier
if id alice >/dev/null && [ "$(stat -c %U /srv/shared)" = alice ] && [ "$(stat -c %U /srv/shared/alice.txt)" = alice ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
