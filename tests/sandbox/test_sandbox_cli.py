"""The real `temper` entry point: output passes through, exit codes, one-line errors.

(`audit-verify` and the other examples run in test_sandbox_docs.py.)
"""

import subprocess
import sys
from pathlib import Path

import pytest

TEMPER = [sys.executable, "-m", "temper"]


@pytest.mark.timeout(300)  # `temper` imports torch (other commands): seconds each on a busy host
def test_temper_sandbox_cli(tmp_path: Path, public_tmp: Path) -> None:
    # A state folder of its own: in the shared one, what a run killed by another test left is swept (with a
    # warning on stderr) by the next process to start a sandbox, this one included: every command here uses it.
    own_state = ["--set", f"state_dir={public_tmp / 'cli-state'}"]
    cmd = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    r = subprocess.run([*TEMPER, "sandbox", "run", "--timeout", "5", *own_state, "--", *cmd], cwd=tmp_path,
                       capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")

    r = subprocess.run([*TEMPER, "sandbox", "run", "--workspace", "missing", *own_state, "--", "true"],
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip() == "error: missing: template folder not found"

    log = tmp_path / "runs" / "sandbox" / "sandbox-audit.jsonl"
    assert len(log.read_text().splitlines()) == 3  # create, exec, close (the failed run never started one)
