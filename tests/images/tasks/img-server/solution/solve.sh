#!/bin/bash
set -e
mkdir -p /srv/site && echo ok > /srv/site/index.html
nohup python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/site >/dev/null 2>&1 &
for i in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/\")" 2>/dev/null && break; sleep 0.1; done
