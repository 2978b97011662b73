#!/bin/bash
cat > /app/index.html <<'HTML'
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Status</title>
<style>#badge { width: 300px; margin: 40px auto; padding: 12px; text-align: center; color: #fff;
                background: #1e8449; font: 20px sans-serif; }</style></head>
<body><div id="badge">All systems go</div></body></html>
HTML
