#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'EOF'
import csv
names = {r["customer_id"]: r["name"] for r in csv.DictReader(open("customers.csv"))}
agg = {}
for r in csv.DictReader(open("orders.csv")):
    n, t = agg.get(r["customer_id"], (0, 0.0))
    agg[r["customer_id"]] = (n + 1, t + float(r["amount"]))
with open("report.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["name", "orders", "total"])
    for cid, (n, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        w.writerow([names[cid], n, f"{t:.2f}"])
EOF
