#!/bin/bash
set -euo pipefail
cd /app
sed -i 's/return sum(range(a, b))/return sum(range(a, b + 1))/' repo/mathutil.py
