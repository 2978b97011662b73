#!/bin/bash
set -euo pipefail
cd /app
find scripts -name '*.sh' -exec chmod u+x {} +
chmod 600 secret.txt
