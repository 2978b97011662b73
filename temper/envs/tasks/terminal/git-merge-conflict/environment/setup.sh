#!/bin/bash
set -euo pipefail
export HOME=/tmp GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.com
export GIT_AUTHOR_DATE="2024-01-01T12:00:00Z" GIT_COMMITTER_DATE="2024-01-01T12:00:00Z"
mkdir -p /app/app && cd /app/app
git init -q -b main
git config user.name dev && git config user.email dev@example.com
echo 1.0.0 > VERSION && printf 'print("main")\n' > main.py && git add . && git commit -q -m "v1"
git checkout -q -b feature
echo 2.0.0-feature > VERSION && printf 'def new_feature():\n    return 1\n' > feature.py
git add . && git commit -q -m "Feature work"
git checkout -q main
echo 1.0.1 > VERSION && printf 'print("main")  # hotfix\n' > main.py && git commit -qam "Hotfix"
