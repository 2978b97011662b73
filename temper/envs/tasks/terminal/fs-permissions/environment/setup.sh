#!/bin/bash
set -euo pipefail
chmod 644 /app/scripts/*.sh /app/scripts/README
chmod 666 /app/secret.txt
