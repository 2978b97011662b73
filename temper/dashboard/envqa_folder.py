"""An envqa report folder as its page shows it (the files temper/envqa/report.py writes): report.json's
tasks as table rows with their flags, the pass-rate histogram, clusters.json's duplicate clusters with
each member's instruction, and a task's evidence file, found only through report.json (no path from the URL).
"""

from pathlib import Path
from typing import Any

from temper.dashboard.eval_folder import load_json

BINS = 10  # the same bins as report.py's pass_rates.png: [0, 0.1), ..., [0.9, 1.0]
INSTRUCTION_CHARS = 4000


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def flags(t: dict[str, Any], min_margin: float | None) -> list[tuple[str, str]]:
    """(text, css class) for what the checks found on a task, beside its verdicts."""
    out: list[tuple[str, str]] = []
    for key in ("load_error", "error"):
        if t.get(key):
            out.append((str(t[key]), "bad"))
    for key, what in (("time_margin", "time"), ("memory_margin", "memory")):
        m = t.get(key)
        if isinstance(m, (int, float)) and not isinstance(m, bool):
            low = min_margin is not None and m < min_margin
            out.append((f"{what} margin {m:.2f}", "bad" if low else ""))
    if t.get("trivial"):
        out.append(("passes without a solution", "bad"))
    if t.get("hackable"):
        out.append(("tests can be tampered with", "bad"))
    if t.get("duplicate_of"):
        out.append((f"duplicate of {Path(str(t['duplicate_of'])).name}", "bad"))
    for o in t.get("contamination") or []:
        out.append((f"overlaps {_dict(o).get('source', '?')}", "bad"))
    sensitive = t.get("sensitive") or []
    if sensitive:
        kinds = sorted({str(_dict(f).get("kind", "?")) for f in sensitive})
        out.append((f"{len(sensitive)} sensitive finding(s): {', '.join(kinds)}", "bad"))
    if t.get("zero_variance"):
        out.append(("zero reward variance", ""))
    for w in t.get("waived") or []:
        out.append((f"waived {w}", "muted"))
    return out


def task_rows(report: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per report.json task (its index is how the evidence route finds the task's file)."""
    tasks = report.get("tasks")
    if not isinstance(tasks, list):
        return [], ["report.json: `tasks` is not a list"]
    min_margin = _dict(report.get("config")).get("min_margin")
    rows, problems = [], []
    for i, t in enumerate(tasks):
        if not isinstance(t, dict):
            problems.append(f"report.json: task {i} is not an object, skipped")
            continue
        path = str(t.get("path", "?"))
        oracle = _dict(t.get("oracle"))
        ci = t.get("ci") if isinstance(t.get("ci"), list) and len(t["ci"]) == 2 else None
        rows.append({"index": i, "id": t.get("id"), "path": path, "name": Path(path).name or path,
                     "verdicts": [str(v) for v in t.get("verdicts") or []], "pass_rate": t.get("pass_rate"),
                     "ci": ci, "samples": t.get("samples"), "passes": t.get("passes"), "oracle": oracle,
                     "flags": flags(t, min_margin if isinstance(min_margin, (int, float)) else None),
                     "file": t.get("file")})
    return rows, problems


def histogram(rows: list[dict[str, Any]], bins: int = BINS) -> dict[str, Any] | None:
    """Tasks per pass-rate bin (bin centres as x); None when no task has a policy pass rate."""
    rates = [r["pass_rate"] for r in rows if isinstance(r["pass_rate"], (int, float))]
    if not rates:
        return None
    counts = [0] * bins
    for rate in rates:
        counts[min(max(int(rate * bins), 0), bins - 1)] += 1  # 1.0 falls in the last bin, as in numpy
    return {"kind": "bars", "title": f"policy pass rate per task ({len(rates)} tasks)",
            "xs": [round((i + 0.5) / bins, 4) for i in range(bins)], "counts": counts, "xlabel": "pass rate"}


def instruction(path: str) -> str | None:
    """The task folder's instruction.md (what makes two tasks duplicates), or None when it is not a folder."""
    try:
        with (Path(path) / "instruction.md").open(errors="replace") as f:
            text = f.read(INSTRUCTION_CHARS + 1)
    except OSError:
        return None
    return text if len(text) <= INSTRUCTION_CHARS else text[:INSTRUCTION_CHARS] + " …"


def clusters(folder: Path, rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """clusters.json's clusters with, per member, its verdicts and instruction; none without the file."""
    path = folder / "clusters.json"
    if not path.is_file():
        return [], None
    data, problem = load_json(path)
    if problem or not isinstance(data, list):
        return [], problem or f"{path}: not a JSON list"
    by_path = {r["path"]: r for r in rows}
    out = []
    for c in data:
        c = _dict(c)
        members = [str(m) for m in c.get("members") or []]
        exact = {str(m) for m in c.get("exact") or []}
        keeper = str(c.get("keeper", members[0] if members else ""))
        out.append({"kind": c.get("kind", "?"), "similarity": c.get("similarity"), "keeper": keeper,
                    "members": [{"path": m, "name": Path(m).name or m, "keep": m == keeper, "exact": m in exact,
                                 "verdicts": by_path.get(m, {}).get("verdicts", []), "instruction": instruction(m)}
                                for m in members]})
    return out, None


def evidence(folder: Path, report: dict[str, Any], index: int) -> tuple[Any, str | None]:
    """Task `index`'s tasks/<name>.json (every check, figures and logs) as report.json names it."""
    tasks = report.get("tasks") if isinstance(report.get("tasks"), list) else []
    if not 0 <= index < len(tasks) or not isinstance(tasks[index], dict):
        return None, f"{folder / 'report.json'}: no task {index}"
    name = str(tasks[index].get("file") or "")
    path = (folder / name).resolve()
    if path.parent != (folder / "tasks").resolve():  # report.json names files under tasks/, nothing else
        return None, f"{folder / 'report.json'}: task {index} names no file under tasks/ ({name!r})"
    return load_json(path)
