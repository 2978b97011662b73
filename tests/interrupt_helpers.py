"""Kill a real first-time step at a chosen instant (SIGKILL, by PID), then run the next command."""

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def env(**extra: str) -> dict[str, str]:
    base = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    base.pop("TEMPER_TEST_PAUSE_AT", None)
    return {**base, **extra}


def start(args: list[str], environ: dict[str, str]) -> subprocess.Popen[str]:
    # a session of its own: its compiler or pip children are killed with it, by its PID as group id
    return subprocess.Popen(args, env=environ, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def kill_when(proc: subprocess.Popen[str], ready: Callable[[], bool], timeout: float) -> str:
    """SIGKILL `proc` (then what is left of its group) once `ready()`; its output so far."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            assert proc.poll() is None, f"exited ({proc.returncode}) before the kill point: {proc.stdout.read()}"
            assert time.monotonic() < deadline, "never reached the kill point"
            time.sleep(0.01)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        kill(proc)
    assert proc.returncode == -signal.SIGKILL
    return proc.stdout.read()


def kill_at_pause(proc: subprocess.Popen[str], timeout: float) -> str:
    """SIGKILL `proc` once it prints that it paused (TEMPER_TEST_PAUSE_AT), holding its lock."""
    lines: list[str] = []

    def paused() -> bool:
        line = proc.stdout.readline()  # blocks until a line: the step prints one when it pauses
        lines.append(line)
        return "temper: paused at" in line or not line

    out = kill_when(proc, paused, timeout)
    assert "temper: paused at" in "".join(lines), "".join(lines)
    return "".join(lines) + out


def kill(proc: subprocess.Popen[str]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its group: the PID we started, and what it started
    proc.wait(timeout=30)


def run(args: list[str], environ: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    proc = start(args, environ)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        kill(proc)
    return subprocess.CompletedProcess(args, proc.returncode, out, "")
