"""`temper doctor` reports each first-time artefact's state and removes what killed runs left (`--dry-run`:
reports only): here a conversion and a sandbox host process killed with SIGKILL, a killed kernel build's
folders and a half-built sandbox Python, all in temporary cache folders."""

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from interrupt_helpers import env, kill_at_pause, kill_when, python, run, start

HOLD = """
import sys, time
from pathlib import Path
from temper.sandbox import Sandbox, SandboxConfig
sb = Sandbox(SandboxConfig(isolation="landlock", state_dir=Path(sys.argv[1]), run_dir=Path(sys.argv[2])))
print("open", sb.id, flush=True)
time.sleep(600)
"""


@pytest.mark.timeout(420)  # the bundled model's conversion: 10-120 s on a busy machine
def test_doctor_reports_then_removes_what_killed_runs_left(tmp_path):
    public = Path(tempfile.mkdtemp(prefix="temper-doctor-"))  # sandbox uids must traverse it
    public.chmod(0o755)
    try:
        _check(tmp_path, public)
    finally:
        shutil.rmtree(public, ignore_errors=True)


def _check(tmp: Path, public: Path) -> None:
    kernels, home, sbpy, state = tmp / "ext", tmp / "home", tmp / "sandbox-python", public / "state"
    environ = env(TORCH_EXTENSIONS_DIR=str(kernels), TEMPER_HOME=str(home), TEMPER_SANDBOX_PYTHON=str(sbpy),
                  VLLM_VENV=str(tmp / "venv-vllm"))
    # a killed kernel build: its half-built folder (torch's baton in it) and its temporary folder
    (kernels / "temper_kernels_0123456789").mkdir(parents=True)
    (kernels / "temper_kernels_0123456789" / "lock").touch()
    (kernels / ".tmp-temper_kernels_0123456789-abc").mkdir()
    (sbpy / "bin").mkdir(parents=True)  # scripts/setup_sandbox_python.sh killed half-way
    (sbpy / ".temper-building").touch()
    # the bundled model's conversion killed after writing its files, before its marker
    conversion = start([*python("from temper.models import resolve_model; resolve_model('smollm2-135m')")],
                       {**environ, "TEMPER_TEST_PAUSE_AT": "the converted model smollm2-135m"})
    kill_at_pause(conversion, timeout=180)
    host = start([*python(HOLD), str(state), str(public / "run")], environ)
    sid = []
    kill_when(host, lambda: sid.append(host.stdout.readline()) or sid[-1].startswith("open") or not sid[-1], 60)
    folder = state / "sb" / sid[-1].split()[1]
    assert folder.is_dir()

    doctor = [sys.executable, "-m", "temper", "doctor", "--state-dir", str(state)]
    report = run([*doctor, "--dry-run"], environ, timeout=120)
    out = report.stdout
    assert report.returncode == 0, out
    assert "C++ kernels      incomplete" in out and "would be removed " + str(kernels / ".tmp-temper_kernels_") in out
    assert f"sandbox Python   incomplete  {sbpy}" in out and "vLLM venv        missing" in out, out
    assert f"sandbox state    leftover    {folder}  (sandbox folder: owner pid {host.pid} on" in out, out
    assert "converted model  leftover    " + str(home / "models" / ".tmp-smollm2-135m-") in out, out
    assert "(--dry-run: nothing removed)" in out and folder.is_dir() and sbpy.is_dir()

    cleaned = run(doctor, environ, timeout=120)
    assert cleaned.returncode == 0 and "leftovers removed" in cleaned.stdout, cleaned.stdout
    assert not folder.exists() and not sbpy.exists() and os.listdir(kernels) == []
    assert [p.name for p in (home / "models").iterdir()] == ["smollm2-135m.lock"]  # free, for the next one
    again = run([*doctor, "--dry-run"], environ, timeout=120).stdout
    assert "0 leftovers found" in again and "C++ kernels      missing" in again, again
