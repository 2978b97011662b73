#!/bin/bash
set -euo pipefail
cd /app
(cd data && find . -type f -size +1000c | sed 's|^\./||' | sort) > large.txt
