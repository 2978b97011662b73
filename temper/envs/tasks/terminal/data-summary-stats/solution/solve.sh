#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
import json, statistics as st
xs = [int(x) for x in open("numbers.txt").read().split()]
json.dump({"mean": round(st.mean(xs), 3), "median": round(st.median(xs), 3), "stdev": round(st.stdev(xs), 3)},
          open("stats.json", "w"))
EOF
