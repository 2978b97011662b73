"""Every repository path the documents and comments name exists: docs/*.md, README.md, pyproject.toml and the
comments and docstrings of temper/ and tests/. A path is a backticked or Markdown-linked one (and, in Python
comments and docstrings, a bare one) that starts with a top-level folder of the repository; a relative
Markdown link is resolved from its document's folder."""

import ast
import io
import os
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOP = ("temper/", "tests/", "docs/", "benchmarks/", "scripts/", "examples/", ".ci/", "runs/", ".venv/",
       ".venv-vllm/")
# Paths that do not exist in a clone: made at run time, or named as a pattern. Each with its reason.
NOT_IN_A_CLONE = {
    "runs/": "temper train, eval and envqa write their run folders under runs/ by default",
    ".venv/": "scripts/setup.sh makes the virtual environment",
    ".venv-vllm/": "scripts/setup.sh --with-vllm makes vLLM's own virtual environment",
    "benchmarks/results/gpu_check/": "scripts/gpu_check.py writes its benchmark run there on a GPU machine",
    "tests/test.sh": "a task folder's verifier (the Terminal-Bench/Harbor layout), relative to the task, not the repo",
    "tests/verify.py": "a web task's checker, beside its tests/test.sh: relative to the task, not the repo",
    ".ci/durations.txt": "scripts/test.sh writes every test's duration there (CI keeps it; ignored by git)",
    ".ci/junit.xml": "scripts/test.sh writes pytest's JUnit report there, the durations' source (ignored by git)",
}
PATH = r"(?:\.{1,2}/)*(?:" + "|".join(re.escape(t) for t in TOP) + r")[\w.\-/{},*<>$]*"
BACKTICKED = re.compile(r"`(" + PATH + r")[^`]*`")
LINKED = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
BARE = re.compile(r"(?<![\w./-])(" + PATH + r")")


def _expand(path: str) -> list[str]:
    """`a_{x,y}.json` -> a_x.json, a_y.json (one level, as the documents write them)."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in _expand(path[:m.start()] + alt + path[m.end():])]


def _clean(path: str) -> str:
    path = path.split("::")[0]
    path = re.sub(r":\d+(-\d+)?$", "", path)
    return path.rstrip(".,;:)")


def _markdown_paths(path: Path) -> list[tuple[str, Path]]:
    """(as written, resolved) for the backticked and linked repository paths of a Markdown file."""
    text = path.read_text()
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks: commands and their output
    found = [(m, ROOT / _clean(m)) for m in BACKTICKED.findall(text)]
    for link in LINKED.findall(text):
        if re.match(r"[a-z]+:", link):  # http:, mailto:
            continue
        found.append((link, Path(os.path.normpath(path.parent / link))))
    return found


def _python_texts(path: Path) -> list[str]:
    """A Python file's comments and docstrings."""
    source = path.read_text()
    texts = [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                texts.append(doc)
    return texts


def _sources() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", *sorted((ROOT / "docs").glob("*.md"))]
    for top in ("temper", "tests"):
        files += [p for p in sorted((ROOT / top).rglob("*.py")) if "tasks" not in p.relative_to(ROOT).parts[:3]]
    return files


def named_paths(path: Path) -> list[tuple[str, Path]]:
    if path.suffix == ".md":
        found = _markdown_paths(path)
    else:
        texts = _python_texts(path) if path.suffix == ".py" else [path.read_text()]
        found = [(m, ROOT / _clean(m)) for text in texts for m in BARE.findall(text)]
    out = []
    for written, resolved in found:
        if any(c in written for c in "<>*$") or "..." in written:
            continue  # a pattern, not a path
        out += [(written, Path(p)) for p in _expand(str(resolved))]
    return out


def _missing(path: Path) -> list[str]:
    missing = []
    for written, resolved in named_paths(path):
        rel = os.path.relpath(os.path.normpath(resolved), ROOT)  # not resolve(): .venv/bin/python is a link
        if rel.startswith(".."):
            missing.append(f"{written} (outside the repository)")
            continue
        if any((rel + "/").startswith(allowed) or rel == allowed for allowed in NOT_IN_A_CLONE):
            continue
        if not resolved.exists():
            missing.append(written)
    return missing


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_repository_path_named_exists(path: Path) -> None:
    missing = _missing(path)
    assert not missing, f"{path.relative_to(ROOT)} names paths that do not exist: {sorted(set(missing))}"


def test_the_extractor_finds_paths_in_each_kind_of_text(tmp_path: Path) -> None:
    runner = "temper/episode_runner.py"
    assert (runner, ROOT / runner) in _markdown_paths(ROOT / "docs" / "architecture.md")
    assert any(w == "../benchmarks/results/async_bench/latest.png" for w, _ in named_paths(ROOT / "docs" / "train.md"))
    assert any(w.startswith("docs/agents.md") for w, _ in named_paths(ROOT / "temper" / "external" / "__init__.py"))
    assert [str(p) for _, p in named_paths(ROOT / "README.md")]  # the README names paths at all
    assert _expand("a_{x,y}.{json,log}") == ["a_x.json", "a_x.log", "a_y.json", "a_y.log"]
    doc = tmp_path / "x.md"
    doc.write_text("see `temper/nowhere.py` and [this](../../nowhere.md)\n")
    assert len(named_paths(doc)) == 2


# A clone has neither the notes beside the repository nor the tracker's numbers: state the fact instead.
POINTERS = re.compile(r"\.\./shared/|\bshared/[A-Z_]+\.md|FIELD[_ ]NOTES|DESIGN\.md|\b(?:issue|stop|session)s? #?\d+"
                      r"|(?<![\w&/])#\d{1,3}\b|\b(?:earlier|previous|last|this) session|\b(?:this|the) issue\b", re.I)


def _texts(path: Path) -> list[str]:
    if path.suffix == ".py":
        return _python_texts(path)
    return [re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)] if path.suffix == ".md" else [
        path.read_text()]


@pytest.mark.parametrize("path", [*_sources(), *sorted((ROOT / "benchmarks").glob("*.py")),
                                  *sorted((ROOT / "scripts").glob("*"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_outside_the_repository(path: Path) -> None:
    found = sorted({m.group(0) for text in _texts(path) for m in POINTERS.finditer(text)})
    assert not found, f"{path.relative_to(ROOT)} points to notes or issues a clone does not have: {found}"
