"""The real `temper` entry point: output passes through, exit codes, one-line errors, audit-verify."""

import subprocess
import sys
from pathlib import Path

import pytest

TEMPER = [sys.executable, "-m", "temper"]


@pytest.mark.timeout(120)
def test_temper_sandbox_cli(tmp_path: Path) -> None:
    cmd = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    r = subprocess.run([*TEMPER, "sandbox", "run", "--timeout", "5", "--", *cmd], cwd=tmp_path, capture_output=True,
                       text=True)
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")

    r = subprocess.run([*TEMPER, "sandbox", "run", "--workspace", "missing", "--", "true"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip() == "error: missing: template folder not found"

    log = tmp_path / "runs" / "sandbox" / "sandbox-audit.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    assert len(lines) == 3  # create, exec, close (the failed run never started a sandbox)
    (tmp_path / "tampered.jsonl").write_text(lines[0] + lines[2])
    r = subprocess.run([*TEMPER, "sandbox", "audit-verify", "tampered.jsonl"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 1
    assert r.stdout.strip() == "tampered.jsonl:2: chain broken (a record before it was removed or edited)"
