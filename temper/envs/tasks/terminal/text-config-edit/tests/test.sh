#!/bin/bash
# Verifier: run the checks in test_outputs.py and write 1 (pass) or 0 (fail) as the reward. A pass needs the
# line that test_outputs.py prints after its last check, with the nonce made here for this run: code under test
# that ends the run early (os._exit(0) on import) cannot make it.
mkdir -p /logs/verifier
cd /app
nonce=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
out=$(echo "$nonce" | python3 /tests/test_outputs.py 2>&1)
status=$?
printf '%s\n' "$out" > /logs/verifier/output.txt
if [ "$status" -eq 0 ] && [ "$(printf '%s\n' "$out" | tail -n 1)" = "all checks passed $nonce" ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
