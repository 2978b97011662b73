"""The examples in docs/rollout_servers.md run as written (in order, in a scratch folder with
`examples/` linked in); `#>` lines are the output they must print. Every process they start (managed
servers, the attached server and its engine processes) is gone when they end."""

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "rollout_servers.md"
BLOCKS = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)


def scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    work = tmp_path / "work"
    work.mkdir()
    (work / "examples").symlink_to(ROOT / "examples")
    venv_bin = str(Path(sys.executable).parent)
    return work, {**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "RAY_AUTH_MODE": "disabled",
                  "HF_HUB_OFFLINE": "1"}


def processes_under(root: Path) -> dict[int, str]:
    """Live processes (not this one) whose working folder or command line is under `root`."""
    found, top = {}, str(root.resolve())
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:  # gone meanwhile, a zombie, or not ours to read
            continue
        if cwd == top or cwd.startswith(top + "/") or top in cmd:
            found[int(pid)] = f"{cmd[:200]} (cwd {cwd})"
    return found


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_doc_examples_run_as_written(tmp_path: Path) -> None:
    assert len(BLOCKS) == 2  # managed, then attached
    work, env = scratch(tmp_path)
    try:
        for code in BLOCKS:
            expected = [ln[3:] for ln in code.splitlines() if ln.startswith("#> ")]
            script = "\n".join(ln for ln in code.splitlines() if not ln.startswith("#>"))
            r = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                               timeout=660)
            logs = "\n".join(f"== {p}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(work.rglob("*.log")))
            assert r.returncode == 0, f"{script}\n---\n{r.stdout}\n{r.stderr[-3000:]}\n{logs}"
            got = [ln.rstrip() for ln in r.stdout.strip().splitlines()]
            assert got == expected, f"{script}\n---\n{r.stdout}\n{r.stderr[-2000:]}"
            left = processes_under(tmp_path)
            assert not left, f"processes left by the example:\n{left}"
    finally:  # whatever failed, no vLLM server of this test keeps running
        for pid in processes_under(tmp_path):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
