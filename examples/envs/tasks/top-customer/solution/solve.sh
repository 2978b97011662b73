#!/bin/bash
# The oracle: runs in /app like the agent would, and must make the verifier pass.
set -euo pipefail
python3 - <<'PY'
import csv
from collections import Counter

totals = Counter()
for row in csv.DictReader(open("/app/orders.csv")):
    totals[row["customer"]] += float(row["amount"])
open("/app/answer.txt", "w").write(totals.most_common(1)[0][0] + "\n")
PY
