"""The suite-wide checks on task text (no sandbox): duplicates, sensitive data, contamination."""

import functools
from pathlib import Path
from typing import Any

from temper.envqa.config import EnvQAConfig
from temper.envqa.contamination import EvalIndex, task_text
from temper.envqa.dedup import Cluster, Doc, find_duplicates, normalise
from temper.envqa.loading import Entry
from temper.envqa.sensitive import scan_task
from temper.envs.registry import parse_spec
from temper.envs.taskfolder import folder_files

_MAX_BYTES = 256 << 10  # larger files are data blobs, not text a person wrote


def folder_texts(folder: Path) -> dict[str, str]:
    """Every text file of a task folder, by its path in the folder (read as the loader reads: a link is never
    followed, so a file of the host never reaches the report)."""
    out = {}
    for rel, data in folder_files(folder, _MAX_BYTES).items():
        try:
            out[rel] = data.decode()
        except UnicodeDecodeError:
            continue
    return out


def entry_texts(e: Entry) -> dict[str, str]:
    if e.load_error:  # a folder the loader refused (e.g. one that links out) is not read at all
        return {}
    if e.folder is not None:
        return folder_texts(e.folder)
    assert e.task is not None
    files = {f"files/{k}": v for k, v in (e.task.payload.get("files") or {}).items()}
    return {"prompt": e.task.prompt, **files, **({"oracle": e.task.oracle} if e.task.oracle else {})}


def dedup_doc(e: Entry, n: int = 5) -> Doc:
    """Instruction + the files the agent gets + the reference solution (shared verifier boilerplate is
    left out: it would make every pair of distinct tasks look alike)."""
    assert e.task is not None
    files = dict(e.task.payload.get("files") or {})
    if e.task.oracle:
        files["solution/solve.sh" if e.folder is not None else "oracle"] = e.task.oracle
    return normalise(e.task.prompt, files, n)


def duplicates(entries: list[Entry], order: list[str], cfg: EnvQAConfig) -> list[Cluster]:
    docs = {e.key: dedup_doc(e, cfg.shingle) for e in entries if e.task is not None}
    return find_duplicates(docs, cfg.dup_threshold, cfg.num_perm, [k for k in order if k in docs])


def eval_index(cfg: EnvQAConfig) -> EvalIndex:
    """Every evaluation suite named in `against`, except the suite under check itself."""
    specs = tuple(s for s in dict.fromkeys(cfg.against) if s.strip() != cfg.suite.strip())
    return _index(specs, cfg.ngram)


@functools.lru_cache(maxsize=4)
def _index(specs: tuple[str, ...], n: int) -> EvalIndex:
    """Built once per process (HumanEval's takes seconds): shipped evaluation suites do not change."""
    return EvalIndex.build(((s, parse_spec(s)) for s in specs), n)


def text_checks(e: Entry, index: EvalIndex) -> dict[str, Any]:
    texts = entry_texts(e)
    out: dict[str, Any] = {"sensitive": {"findings": scan_task(texts)}}
    if e.task is not None:
        full = task_text(e.task) + "\n" + "\n".join(v for k, v in texts.items() if k.startswith("tests/"))
        out["contamination"] = {"against": index.suites, "ngram": index.n, "overlaps": index.overlaps(full)}
    return out
