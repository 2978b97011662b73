"""docs/envs.md: its Python blocks run as written, and the files it shows match examples/envs/."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "envs.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    return BLOCK.findall(DOC.read_text())


def test_files_shown_in_the_guide_are_the_example_files() -> None:
    shown = [(body.split("\n", 1)) for _, body in _blocks() if body.startswith("# file: ")]
    assert len(shown) == 7
    for header, body in shown:
        path = ROOT / header.removeprefix("# file: ").strip()
        assert path.read_text() == body, f"docs/envs.md shows a different {path}"


def test_python_examples_run(monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "path", list(sys.path))
    namespace: dict = {}
    code = [body for lang, body in _blocks() if lang == "python" and not body.startswith("# file: ")]
    assert len(code) == 5
    for i, block in enumerate(code):
        exec(compile(block, f"docs/envs.md[python block {i}]", "exec"), namespace)
