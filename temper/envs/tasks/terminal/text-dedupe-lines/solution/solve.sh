#!/bin/bash
set -euo pipefail
cd /app
awk '!seen[$0]++' names.txt > unique.txt
