#!/bin/bash
set -euo pipefail
cd /app
cd app
git -c user.name=dev -c user.email=dev@example.com merge feature -m "Merge feature" || true
git checkout --theirs VERSION
git add VERSION
git -c user.name=dev -c user.email=dev@example.com commit -q --no-edit
