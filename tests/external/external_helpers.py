"""Helpers for the external-agent tests: a terminal task folder whose verifier wants /app/done.txt = ok."""

from pathlib import Path

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/done.txt 2>/dev/null)" = "ok" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def task_folder(root: Path, name: str = "make-done", agent_timeout_s: int | None = None,
                verifier_timeout_s: int | None = None) -> Path:
    d = root / name
    for sub in ("tests", "solution", "environment"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Write the word ok into /app/done.txt.\n")
    agent = f"[agent]\ntimeout_sec = {agent_timeout_s}\n" if agent_timeout_s else ""
    verifier = f"[verifier]\ntimeout_sec = {verifier_timeout_s}\n" if verifier_timeout_s else ""
    (d / "task.toml").write_text(f'[metadata]\ndifficulty = "easy"\n{agent}{verifier}')
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "solution" / "solve.sh").write_text("echo ok > /app/done.txt\n")
    return d
