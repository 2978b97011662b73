"""An eval folder as the evaluation page shows it: summary.json (written by temper/evals/harness.py) turned
into table rows, the long-context grid into heatmap cells and the latency/cost curves into chart specs.

summary.json is read as untrusted input: an entry of the wrong shape is skipped with a problem line, a
missing section is simply absent, so a hand-edited or half-written file never breaks the page.
"""

import json
from pathlib import Path
from typing import Any


def load_json(path: Path) -> tuple[Any, str | None]:
    """(data, None), or (None, one line naming the file) when it cannot be read or is not JSON."""
    try:
        return json.loads(path.read_text(errors="replace")), None
    except FileNotFoundError:
        return None, f"{path}: missing"
    except OSError as exc:
        return None, f"{path}: cannot be read ({exc.strerror})"
    except json.JSONDecodeError as exc:
        return None, f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})"


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _float(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None


def pass_ks(entry: dict[str, Any]) -> list[int]:
    return sorted(int(k[5:]) for k in entry if k.startswith("pass@") and k[5:].isdigit())


def score_row(name: str, e: dict[str, Any]) -> dict[str, Any]:
    """The score columns of a suite or a domain (summary.py's `metrics`)."""
    return {"name": name, "n": e.get("n"), "mean": _float(e.get("mean_reward")), "low": _float(e.get("ci_low")),
            "high": _float(e.get("ci_high")), "pass": {k: e.get(f"pass@{k}") for k in pass_ks(e)},
            "n_items": e.get("items"), "infra": e.get("infra_failures")}


def suite_rows(summary: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per suite (with its domains, failures, tool calls and usage), and the entries skipped."""
    rows, problems = [], []
    suites = summary.get("suites")
    if not isinstance(suites, dict):
        return [], ["summary.json: `suites` is not an object"]
    for spec, e in suites.items():
        if not isinstance(e, dict):
            problems.append(f"summary.json: suite {spec!r} is not an object, skipped")
            continue
        row = score_row(spec, e)
        row["samples"] = e.get("samples")
        row["failures"] = _dict(e.get("failures"))
        row["domains"] = [score_row(d, x) for d, x in _dict(e.get("domains")).items() if isinstance(x, dict)]
        row["tool_calls"] = _dict(e.get("tool_calls"))
        row["usage"] = _dict(e.get("usage"))
        rows.append(row)
    return rows, problems


def ci_scale(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """The value range the CI bars are drawn on: [0, 1] unless some score lies outside it."""
    vals = [v for r in rows for x in (r, *r["domains"]) for v in (x["low"], x["high"], x["mean"]) if v is not None]
    return min([0.0, *vals]), max([1.0, *vals])


def bar(mean: float | None, low: float | None, high: float | None, lo: float, hi: float) -> dict[str, float] | None:
    """Percent positions of a CI bar (range and mean mark) on the scale [lo, hi]; None without a CI."""
    if None in (mean, low, high) or hi <= lo:
        return None
    pos = lambda x: round(100 * (min(max(x, lo), hi) - lo) / (hi - lo), 2)  # noqa: E731
    return {"left": pos(low), "width": max(pos(high) - pos(low), 0.6), "mean": pos(mean),
            "zero": pos(0.0) if lo < 0 < hi else None}


def heat_style(score: float | None) -> str:
    """Cell colour of a score in [0, 1]: red (0) through yellow to green (1), light enough for dark text."""
    if score is None:
        return "background:#eef0f2"
    s = min(max(score, 0.0), 1.0)
    return f"background:hsl({round(120 * s)},70%,{round(80 - 8 * s)}%)"


def heatmap(grid: dict[str, Any]) -> dict[str, Any] | None:
    """longctx_grid.py's summary as heatmap rows (one per length, a cell per depth), or None when it has no
    usable accuracy matrix."""
    lengths, depths, acc = grid.get("lengths"), grid.get("depths"), grid.get("accuracy")
    if not all(isinstance(x, list) for x in (lengths, depths, acc)) or len(acc) != len(lengths):
        return None
    by_length, tokens = _dict(grid.get("by_length")), _dict(grid.get("prompt_tokens"))
    rows = []
    for length, scores in zip(lengths, acc, strict=True):
        scores = scores if isinstance(scores, list) else []
        cells = [_float(scores[i]) if i < len(scores) else None for i in range(len(depths))]
        total = _float(by_length.get(str(length)))
        rows.append({"length": length, "tokens": tokens.get(str(length)), "total": total,
                     "total_style": heat_style(total),
                     "cells": [{"score": s, "style": heat_style(s)} for s in cells]})
    profile = _dict(grid.get("depth_profile"))
    depth_row = [_float(profile.get(f"{d:g}")) if isinstance(d, (int, float)) else None for d in depths]
    return {"depths": depths, "rows": rows, "effective_length": grid.get("effective_length"),
            "base_score": grid.get("base_score"), "threshold": grid.get("threshold"),
            "kinds": grid.get("kinds") or [], "n_per_cell": grid.get("n_per_cell"),
            "infra_failures": grid.get("infra_failures"),
            "depth_profile": [{"score": s, "style": heat_style(s)} for s in depth_row],
            "depth_profile_kinds": grid.get("depth_profile_kinds") or []}


CURVES = (  # (chart title, [(field, label)]) drawn against the grid's context length
    ("latency (s)", [("latency_s", "item latency"), ("ttft_s", "time to first token")]),
    ("time per output token (s)", [("tpot_s", "time per output token")]),
    ("cost per item", [("cost_per_item", "cost per item")]),
    ("memory (MB)", [("peak_mem_mb", "peak resident"), ("kv_cache_mb", "KV cache")]),
    ("tokens per item", [("prompt_tokens", "prompt"), ("output_tokens", "output")]),
)


def curve_charts(curves: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """curves.py's points as line-chart specs (one per quantity that has any value) and as table rows."""
    points = sorted((p for p in curves.get("points") or [] if isinstance(p, dict) and _float(p.get("length"))),
                    key=lambda p: p["length"])
    xs = [p["length"] for p in points]
    charts = []
    for title, fields in CURVES:
        ys = [[_float(p.get(f)) for p in points] for f, _ in fields]
        keep = [(y, label) for y, (_, label) in zip(ys, fields, strict=True) if any(v is not None for v in y)]
        if xs and keep:
            charts.append({"kind": "line", "title": title, "xs": xs, "ys": [y for y, _ in keep],
                           "labels": [label for _, label in keep], "xlabel": "context length"})
    return charts, points


def grid_charts(grid: dict[str, Any]) -> list[dict[str, Any]]:
    """Accuracy by context length (overall and per task kind) and the depth profile, as line-chart specs."""
    charts = []
    lengths = [x for x in grid.get("lengths") or [] if _float(x) is not None]
    by_length, by_kind = _dict(grid.get("by_length")), _dict(grid.get("by_kind"))
    if lengths:
        ys = [[_float(by_length.get(str(x))) for x in lengths]]
        labels = ["all kinds"]
        for kind, scores in by_kind.items():
            ys.append([_float(_dict(scores).get(str(x))) for x in lengths])
            labels.append(kind)
        charts.append({"kind": "line", "title": "accuracy by context length", "xs": lengths, "ys": ys,
                       "labels": labels, "xlabel": "context length"})
    depths = [x for x in grid.get("depths") or [] if _float(x) is not None]
    profile = _dict(grid.get("depth_profile"))
    if depths and profile:
        charts.append({"kind": "line", "title": "accuracy by depth of the key information", "xs": depths,
                       "ys": [_float(profile.get(f"{d:g}")) for d in depths], "labels": ["accuracy"],
                       "xlabel": "depth"})
    return charts


def section(folder: Path, summary: dict[str, Any], name: str) -> tuple[dict[str, Any] | None, str | None]:
    """summary.json's `longctx_grid` / `curves`, else the file harness.py also writes beside it; (None, None)
    when the run had no grid."""
    if isinstance(summary.get(name), dict):
        return summary[name], None
    path = folder / f"{name}.json"
    if not path.is_file():
        return None, None
    data, problem = load_json(path)
    return (data, None) if isinstance(data, dict) else (None, problem or f"{path}: not a JSON object")
