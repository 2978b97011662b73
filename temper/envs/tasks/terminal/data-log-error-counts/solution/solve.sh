#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
import json, re
counts = {}
for line in open("app.log"):
    m = re.match(r"\S+ ERROR \[(\w+)\]", line)
    if m:
        counts[m.group(1)] = counts.get(m.group(1), 0) + 1
json.dump(counts, open("errors.json", "w"))
EOF
