#!/bin/bash
# The verifier: runs after the agent, in the same /app. It writes its reward to
# /logs/verifier/reward.json: components, and the reward itself under "reward".
mkdir -p /logs/verifier
python3 - <<'PY'
import json
from pathlib import Path

answer = Path("/app/answer.txt")
exists = answer.is_file()
correct = exists and answer.read_text().strip() == "ada"
Path("/logs/verifier/reward.json").write_text(json.dumps(
    {"reward": float(correct), "answered": float(exists), "correct": float(correct)}))
PY
