#!/bin/bash
set -euo pipefail
cd /app
awk -F, 'NR>1 {s+=$3} END {printf "%.2f\n", s}' sales.csv > total.txt
