#!/bin/bash
mkdir -p /logs/verifier
if [ "$(python3 -c "import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8000/\", timeout=5).read().decode().strip())")" = ok ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
