#!/bin/bash
set -euo pipefail
cd /app
git -C lib log --format=%H -S'# TODO: remove hack' | tail -n1 > answer.txt
