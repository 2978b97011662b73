"""Helpers for env tests: build task folders on the fly, kill a sandbox from outside."""

import os
import signal
import textwrap
from pathlib import Path

import pytest

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def make_task_folder(root: Path, name: str = "t", toml: str = "", test_sh: str = TEST_SH,
                     solve: str = "echo ok > /app/done.txt\n", files: dict[str, str] | None = None) -> Path:
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "environment").mkdir()
    (d / "instruction.md").write_text("Create /app/done.txt.\n")
    (d / "task.toml").write_text(textwrap.dedent(toml) or '[metadata]\ndifficulty = "easy"\n')
    (d / "tests" / "test.sh").write_text(test_sh)
    (d / "solution" / "solve.sh").write_text(solve)
    for rel, text in (files or {}).items():
        (d / "environment" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "environment" / rel).write_text(text)
    return d


def kill_sandbox(sb) -> None:
    """Kill a sandbox's supervisor from outside, as a host OOM-killer or a crash would."""
    os.killpg(sb._sup._proc.pid, signal.SIGKILL)


@pytest.fixture
def killer():
    return kill_sandbox


@pytest.fixture
def task_folder(tmp_path: Path):
    return lambda **kw: make_task_folder(tmp_path, **kw)
