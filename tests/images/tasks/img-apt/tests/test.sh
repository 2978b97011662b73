#!/bin/bash
mkdir -p /logs/verifier
if [ "$(temper-hello)" = "hello from a deb" ] && dpkg -s temper-hello >/dev/null; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
