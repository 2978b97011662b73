#!/bin/bash
set -euo pipefail
cd /app
cd photos
for f in *; do
    new=$(echo "$f" | tr 'A-Z ' 'a-z_')
    [ "$f" = "$new" ] || mv "$f" "$new"
done
