"""docs/envqa.md: its bash and python blocks run as written, in order, in one temporary folder."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "envqa.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


@pytest.mark.e2e  # the last example samples and trains the real model
@pytest.mark.timeout(600)
def test_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    namespace: dict = {}
    ran = []
    for lang, body in BLOCK.findall(DOC.read_text()):
        if lang == "bash":
            r = subprocess.run(["bash", "-euo", "pipefail", "-c", body], env=env, capture_output=True, text=True,
                               timeout=240)
            assert r.returncode == 0, f"docs/envqa.md bash block failed:\n{body}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
        elif lang == "python":
            exec(compile(body, "docs/envqa.md", "exec"), namespace)
        else:
            continue
        ran.append(lang)
    assert ran == ["bash", "python", "python", "bash", "python"]
