"""The README's `console` examples run as written: each `$ ` command (through bash, from the repository root)
prints exactly the lines below it, on stdout and stderr together."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```console\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def test_readme_console_examples_print_what_they_show() -> None:
    assert len(BLOCKS) >= 2
    venv_bin = str(Path(sys.executable).parent)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    for block in BLOCKS:
        command, *expected = block.rstrip("\n").splitlines()
        assert command.startswith("$ .venv/bin/temper "), command
        # the README names the venv the setup makes; the test runs whichever interpreter runs it
        script = command[2:].replace(".venv/bin/temper", f"{venv_bin}/temper", 1)
        r = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        got = (r.stdout + r.stderr).rstrip("\n").splitlines()
        assert got == expected, (command, r.stdout, r.stderr)
