"""The examples in docs/train.md run as written (in order, in a scratch folder with `examples/`
linked in); `#>` lines are the output they must print. Also: bad input fails with one line."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "train.md"
BLOCKS = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)


def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    venv_bin = str(Path(sys.executable).parent)
    return work, {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "RAY_AUTH_MODE": "disabled"}


@pytest.mark.timeout(1200)
def test_doc_examples_run_as_written(tmp_path: Path) -> None:
    assert len(BLOCKS) >= 5
    work, env = scratch(tmp_path)
    for code in BLOCKS:
        expected = [ln[3:] for ln in code.splitlines() if ln.startswith("#> ")]
        script = "\n".join(ln for ln in code.splitlines() if not ln.startswith("#>"))
        r = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                           timeout=540)
        assert r.returncode == 0, f"{script}\n---\n{r.stdout}\n{r.stderr[-3000:]}"
        got = [ln.rstrip() for ln in r.stdout.strip().splitlines()]
        assert got == expected, f"{script}\n---\n{r.stdout}\n{r.stderr[-2000:]}"


def test_bad_input_is_one_line_naming_it(tmp_path: Path) -> None:
    work, env = scratch(tmp_path)
    cases = [  # the docs examples above cover a bad value, an unknown suite and a missing run folder
        (["--set", "orchestrator.nosuch=1"], "orchestrator.nosuch: unknown field"),
        (["--set", "suites=[{spec: 'reasoning_gym:task=nope'}]", "--out", "runs/x"], "reasoning_gym: no task 'nope'"),
    ]
    for args, text in cases:
        r = subprocess.run([sys.executable, "-m", "temper", "train", *args], cwd=work, env=env, capture_output=True,
                           text=True, timeout=120)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode != 0 and len(lines) == 1 and text in lines[0], (args, r.stderr)
    assert not (work / "runs" / "x").exists()  # nothing is created for a run that cannot start
