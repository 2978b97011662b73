#!/bin/bash
set -euo pipefail
export HOME=/tmp GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.com
export GIT_AUTHOR_DATE="2024-01-01T12:00:00Z" GIT_COMMITTER_DATE="2024-01-01T12:00:00Z"
mkdir -p /app/project && cd /app/project
git init -q -b main
git config user.name dev && git config user.email dev@example.com
printf 'print("app")\n' > app.py
git add app.py && git commit -q -m "Initial commit"
printf 'from greet import hello\nprint(hello("app"))\n' > app.py
printf 'def hello(name):\n    return f"hello {name}"\n' > greet.py
