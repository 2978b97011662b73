"""The README's main command (`temper train`, the default recipe) runs end to end, shortened to two
steps and a small held-out evaluation so that CI stays within its budget."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def main_command() -> list[str]:
    first = re.search(r"```bash\n(.*?)\n", (ROOT / "README.md").read_text()).group(1)
    cmd = first.split("&&")[-1].strip()
    argv = shlex.split(cmd)
    assert argv[0] == ".venv/bin/temper" and argv[1] == "train", cmd
    return [sys.executable, "-m", "temper", *argv[1:]]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_readme_main_command_runs_two_steps(tmp_path: Path) -> None:
    argv = [a for a in main_command() if not a.startswith("--max-steps")]
    out = tmp_path / "run"
    r = subprocess.run([*argv, "--max-steps", "2", "--set", "eval.n=16", "--out", str(out)], cwd=ROOT,
                       capture_output=True, text=True, timeout=880, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 2 and summary["before"]["n"] == 16 and summary["after"]["n"] == 16
    s = json.loads((out / "summary.json").read_text())
    assert {"before", "after", "difference"} <= set(s)
    assert (out / "summary.md").exists() and (out / "plots" / "reward.png").exists()
