#!/bin/bash
set -euo pipefail
cd /app
newest=$(cd releases && ls -d */ | tr -d / | sort -V | tail -n1)
ln -sfn "releases/$newest" current
