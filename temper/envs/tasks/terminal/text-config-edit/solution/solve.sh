#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
lines, section = [], None
for line in open("config.ini").read().splitlines():
    if line.startswith("["):
        section = line
    if section == "[server]" and line.startswith("port"):
        line = "port = 9090"
    lines.append(line)
open("config.ini", "w").write("\n".join(lines) + "\n")
EOF
