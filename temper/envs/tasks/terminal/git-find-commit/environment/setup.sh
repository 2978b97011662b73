#!/bin/bash
set -euo pipefail
export HOME=/tmp GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.com
export GIT_AUTHOR_DATE="2024-01-01T12:00:00Z" GIT_COMMITTER_DATE="2024-01-01T12:00:00Z"
mkdir -p /app/lib && cd /app/lib
git init -q -b main
git config user.name dev && git config user.email dev@example.com
printf 'def parse(s):\n    return s.split(",")\n' > parse.py && git add . && git commit -q -m "Add parser"
printf 'def fmt(x):\n    return str(x)\n' > fmt.py && git add . && git commit -q -m "Add formatter"
printf 'def parse(s):\n    # TODO: remove hack\n    return s.replace(" ", "").split(",")\n' > parse.py
git commit -qam "Speed up parsing"
printf 'def fmt(x):\n    return repr(x)\n' > fmt.py && git commit -qam "Use repr"
printf 'def parse(s):\n    # TODO: remove hack\n    return [p for p in s.replace(" ", "").split(",") if p]\n' > parse.py
git commit -qam "Skip empty fields"
