#!/usr/bin/env bash
# Set everything up (vLLM, a browser and the image tools included, for the vLLM backend's, the dashboard's and the
# image tests), then run the whole test suite (slow and e2e tests included) and lint. The inner loop while editing
# is `-m "not e2e"` (docs/testing.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-vllm --with-browser --with-images
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_AUTH_MODE=disabled
.venv/bin/ruff check .
# Two workers, each given whole test files (module fixtures such as a Ray cluster or a vLLM server start once).
# The console shows the 20 slowest; every test's time goes to .ci/durations.txt (slowest first), which CI keeps.
mkdir -p .ci
rc=0
.venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=20 --junitxml=.ci/junit.xml "$@" || rc=$?
.venv/bin/python - .ci/junit.xml > .ci/durations.txt <<'PY' || echo "no per-test durations (.ci/junit.xml unreadable)" >&2
import sys
import xml.etree.ElementTree as ET

cases = [(float(c.get("time") or 0), f"{c.get('classname', '')}::{c.get('name', '')}", "skipped" if c.find("skipped")
          is not None else "failed" if c.find("failure") is not None or c.find("error") is not None else "passed")
         for c in ET.parse(sys.argv[1]).iter("testcase")]
print(f"# {len(cases)} tests, {sum(t for t, _, _ in cases):.1f} s in all (setup + call + teardown), slowest first")
for t, name, outcome in sorted(cases, reverse=True):
    print(f"{t:9.2f}s  {outcome:7}  {name}")
PY
exit "$rc"
