#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
import json
with open("alerts.jsonl", "w") as out:
    for line in open("events.jsonl"):
        e = json.loads(line)
        if e["type"] == "alert" and e["level"] >= 3:
            out.write(json.dumps(e) + "\n")
EOF
