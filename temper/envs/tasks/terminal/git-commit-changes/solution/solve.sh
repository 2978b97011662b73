#!/bin/bash
set -euo pipefail
cd /app
cd project
git add -A
git -c user.name=dev -c user.email=dev@example.com commit -q -m "Add greeting feature"
