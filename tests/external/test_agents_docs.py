"""Every bash example of docs/agents.md runs as written (from a folder holding the repo's examples/,
with the venv's python and temper first on PATH): both example agents evaluated on a shipped
terminal task, and the toy recipe trained through an external agent."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "agents.md"


def blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_has_its_examples():
    assert len(blocks()) == 3


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(blocks())))
def test_doc_example_runs(index, tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks()[index]], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, f"block {index}:\n{blocks()[index]}\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    if index < 2:  # the evaluations: the program ran and reached the model (not an infrastructure failure)
        (items,) = (tmp_path / "runs").glob("agents-*/suites/terminal/items.jsonl")
        row = json.loads(items.read_text().splitlines()[0])
        assert row["failure"] is None and row["turns"] >= 1 and row["tokens_out"] > 0, row
    else:
        summary = json.loads((tmp_path / "runs" / "external-toy" / "summary.json").read_text())
        assert summary["after"]["n"] == 8 and summary["after"]["failed"] == 0
