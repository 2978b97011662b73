"""Sandbox state killed half-way never breaks the next run on the host: a template copy killed before its
rename (holding its lock) is taken over and staged anew; the idmapped views and sandbox folders of a host
process killed with its sandboxes open are unmounted and removed by the next run. Real SIGKILLs, temporary
state folders; the sandbox Python's set-up killed half-built is never used and is built anew."""

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from interrupt_helpers import env, kill_at_pause, kill_when, python, run, start

from temper.sandbox import layout

OPEN = """
import logging, sys, time
logging.basicConfig(level=logging.INFO, format="%(message)s")
from pathlib import Path
from temper.sandbox import Sandbox, SandboxConfig
state, template, run_dir, hold = sys.argv[1:5]
kept = []
for mode in ("bwrap", "landlock"):
    sb = Sandbox(SandboxConfig(isolation=mode, workspace=Path(template), state_dir=Path(state),
                               run_dir=Path(run_dir) / mode))
    print(mode, sb.id, sb.exec("cat hello.txt").stdout.decode().strip(), flush=True)
    kept.append(sb) if hold == "hold" else sb.close()
if kept:
    print("holding", flush=True)
    time.sleep(600)
"""


@pytest.fixture
def public() -> Iterator[Path]:
    """Folders sandbox uids can traverse (pytest's are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="temper-interrupt-"))
    d.chmod(0o755)
    (d / "template").mkdir()
    (d / "template" / "hello.txt").write_text("hello from the template\n")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def args(d: Path, hold: str = "") -> list[str]:
    return [*python(OPEN), str(d / "state"), str(d / "template"), str(d / "run"), hold]


def mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


@pytest.mark.timeout(180)
def test_a_template_copy_killed_before_its_rename_is_staged_anew(public):
    first = start(args(public), env(TEMPER_TEST_PAUSE_AT=f"the staged template {public / 'template'}"))
    kill_at_pause(first, timeout=60)
    templates = public / "state" / "templates"
    assert [p.name[:5] for p in templates.iterdir()] == [".tmp-"]  # the half copy, never renamed

    out = run(args(public), env(), timeout=120).stdout
    assert re.search(rf"taking over .*template-\w+\.lock from pid {first.pid} .*which is gone", out), out
    assert re.search(r"removing a crashed run's interrupted copy .*/templates/\.tmp-", out), out
    assert out.count("hello from the template") == 2, out  # both modes see the staged copy
    assert [p.name.startswith(".") for p in templates.iterdir()] == [False]


@pytest.mark.timeout(180)
def test_views_and_folders_of_a_killed_host_process_are_removed_by_the_next_run(public):
    first = start(args(public, "hold"), env())
    lines: list[str] = []
    kill_when(first, lambda: lines.append(first.stdout.readline()) or "holding" in lines[-1] or not lines[-1], 120)
    ids = dict(line.split()[:2] for line in lines if line.startswith(("bwrap", "landlock")))
    state = public / "state"
    view, folder = state / "views" / ids["bwrap"], state / "sb" / ids["landlock"]
    assert folder.is_dir(), lines
    had_view = view.is_dir()  # where idmapped mounts work here (root, kernel 5.12+)
    assert not had_view or mounted(view)

    out = run(args(public), env(), timeout=120).stdout
    assert out.count("hello from the template") == 2, out
    assert re.search(rf"removing a crashed run's sandbox folder {folder} \(owner pid {first.pid} .*is gone", out)
    assert not folder.exists() and not mounted(folder)
    if had_view:
        assert f"removing a crashed run's idmapped view {view}" in out, out
        assert not view.exists() and not mounted(view)
    assert not list((state / "views").glob(".*.owner")) and not list((state / "sb").glob(".*.owner"))


@pytest.mark.timeout(240)
def test_a_sandbox_python_killed_half_built_is_never_used_and_built_anew(tmp_path, monkeypatch):
    target = tmp_path / "sandbox-python"
    monkeypatch.setenv("TEMPER_SANDBOX_PYTHON", str(target))
    script = ["bash", "scripts/setup_sandbox_python.sh"]
    first = start(script, env(TEMPER_SANDBOX_PYTHON=str(target), TEMPER_TEST_PAUSE_AT="the sandbox Python, half built"))
    kill_at_pause(first, timeout=120)
    assert (target / "bin" / "python3").exists() and not (target / "bin" / "pytest").exists()
    assert layout.repo_python_env() is None  # half built: sandboxes run without it rather than on it

    done = run(script, env(TEMPER_SANDBOX_PYTHON=str(target)), timeout=200)
    out = done.stdout
    assert done.returncode == 0, out
    assert re.search(rf"taking over .*sandbox-python\.lock from pid {first.pid} .*which is gone", out), out
    assert f"removing {target}: an interrupted build" in out, out
    assert layout.repo_python_env() == target
    version = subprocess.run([target / "bin" / "pytest", "--version"], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and "pytest" in version.stdout + version.stderr
