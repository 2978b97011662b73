#!/bin/bash
# Verifier: run the checks in test_outputs.py and write 1 (pass) or 0 (fail) as the reward.
mkdir -p /logs/verifier
cd /app
if python3 /tests/test_outputs.py > /logs/verifier/output.txt 2>&1; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
