#!/bin/bash
set -euo pipefail
cd /app
for f in inbox/*; do
    name=$(basename "$f")
    case "$name" in *.*) ext="${name##*.}" ;; *) ext=none ;; esac
    mkdir -p "sorted/$ext" && mv "$f" "sorted/$ext/"
done
