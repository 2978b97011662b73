#!/bin/bash
set -euo pipefail
cd /app
wc -w < input.txt | tr -d ' ' > count.txt
