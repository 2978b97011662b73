"""Which folders the dashboard shows: train runs, eval folders and envqa reports, found under the roots.

A folder is recognised by the files its writer always leaves first: a train run by `config.yaml` beside
`metrics.jsonl`, `audit.jsonl` or `store.sqlite` (temper/orchestrator/run_dir.py); an eval folder by
`summary.json` with `suites` and `run` (temper/evals/harness.py); an envqa report by `report.json` with
`tasks` (temper/envqa/report.py). Eval folders inside a run (`RUN/eval/before`) are listed under it too.
Nothing here opens a file for writing.
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

Kind = Literal["run", "eval", "envqa"]
MAX_DEPTH = 4  # roots/a/b/c/d: runs/tool-use/smoke/eval/before


@dataclass(frozen=True)
class Folder:
    kind: Kind
    path: Path
    key: str  # the URL path that names it: "<root index>/<path under the root>"

    @property
    def name(self) -> str:
        return self.key.split("/", 1)[1] or self.path.name


def _json_keys(path: Path) -> set[str] | None:
    """The top-level keys of a JSON object file; None when it is not valid JSON."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return set(data) if isinstance(data, dict) else set()


def kind_of(path: Path) -> Kind | None:
    """What the folder holds, or None when it is none of the three. A corrupt summary.json or report.json
    beside the folder its writer makes with it (suites/, tasks/) still counts, so that the page can say so."""
    if (path / "config.yaml").is_file() and any((path / f).exists() for f in
                                                 ("metrics.jsonl", "audit.jsonl", "store.sqlite")):
        return "run"
    for name, kind, keys, sub in (("summary.json", "eval", {"suites", "run"}, "suites"),
                                  ("report.json", "envqa", {"tasks"}, "tasks")):
        if (path / name).is_file():
            found = _json_keys(path / name)
            if (found is None and (path / sub).is_dir()) or (found is not None and keys <= found):
                return kind  # type: ignore[return-value]
    return None


def discover(roots: list[Path]) -> list[Folder]:
    """Every run, eval and envqa folder under the roots (a root may be such a folder itself), in path order."""
    found: list[Folder] = []
    for i, root in enumerate(roots):
        if not root.is_dir():
            continue
        for dirpath, dirnames, _ in os.walk(root):
            here = Path(dirpath)
            depth = len(here.relative_to(root).parts)
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in ("checkpoints", "tasks")
                                 and depth < MAX_DEPTH)
            kind = kind_of(here)
            if kind is not None:
                rel = here.relative_to(root).as_posix()
                found.append(Folder(kind, here, f"{i}/{'' if rel == '.' else rel}"))
            if kind in ("eval", "envqa"):
                dirnames[:] = []  # their sub-folders are theirs (suites/, tasks/)
    return found


def resolve(roots: list[Path], key: str) -> Path | None:
    """The folder a key names, or None when it is not under one of the roots (no `..` escapes)."""
    index, _, rel = key.partition("/")
    if not index.isdigit() or int(index) >= len(roots):
        return None
    root = roots[int(index)].resolve()
    path = (root / rel).resolve()
    return path if path == root or root in path.parents else None
