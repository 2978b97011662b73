#!/bin/bash
set -euo pipefail
cd /app
grep -oiE '[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}' contacts.txt | tr 'A-Z' 'a-z' | sort -u > emails.txt
