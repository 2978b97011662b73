#!/bin/bash
set -euo pipefail
export HOME=/tmp GIT_AUTHOR_NAME=dev GIT_AUTHOR_EMAIL=dev@example.com GIT_COMMITTER_NAME=dev GIT_COMMITTER_EMAIL=dev@example.com
export GIT_AUTHOR_DATE="2024-01-01T12:00:00Z" GIT_COMMITTER_DATE="2024-01-01T12:00:00Z"
mkdir -p /app/service && cd /app/service
git init -q -b main
git config user.name dev && git config user.email dev@example.com
printf '{\n  "debug": false,\n  "workers": 2,\n  "name": "x"\n}\n' > config.json
git add . && git commit -q -m "Initial config"
sed -i 's/"workers": 2/"workers": 8/' config.json && git commit -qam "More workers"
sed -i 's/"debug": false/"debug": true/' config.json && git commit -qam "Tweak settings"
sed -i 's/"name": "x"/"name": "svc"/' config.json && git commit -qam "Name the service"
