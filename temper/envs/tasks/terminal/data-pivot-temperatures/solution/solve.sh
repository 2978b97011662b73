#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
import csv
by = {}
for r in csv.DictReader(open("temps.csv")):
    by.setdefault(r["city"], []).append(float(r["temp"]))
with open("summary.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["city", "min", "max", "mean"])
    for c in sorted(by):
        v = by[c]
        w.writerow([c, f"{min(v):.1f}", f"{max(v):.1f}", f"{sum(v) / len(v):.2f}"])
EOF
