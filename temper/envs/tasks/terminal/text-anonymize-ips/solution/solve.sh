#!/bin/bash
set -euo pipefail
cd /app
sed -E 's/([0-9]{1,3}\.){3}[0-9]{1,3}/0.0.0.0/g' access.log > access_anon.log
