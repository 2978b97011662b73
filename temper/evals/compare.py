"""`compare_runs(a, b)`: per suite and per domain, the change from run A to run B with a CI,
and a verdict. Items are paired per task where both runs have it (a paired bootstrap over the
matched tasks), otherwise the two sides are resampled separately (unpaired).

A suite "improved" when the CI of its change lies above zero, "regressed" when it lies below.
Verdict: "improved everywhere" when every suite improved; "regressed" when every suite regressed;
"mixed: regressed on S, ..." when some but not all regressed; otherwise "improved on S, ...,
unchanged elsewhere" or "no significant change".
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.errors import TemperError
from temper.evals.records import ItemRecord, load_records
from temper.evals.stats import paired_bootstrap_difference, unpaired_bootstrap_difference
from temper.evals.suite_runner import slug
from temper.evals.summary import task_scores


@dataclass
class Comparison:
    a: str
    b: str
    suites: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdict: str = ""
    regressed: list[str] = field(default_factory=list)
    improved: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "verdict": self.verdict, "regressed": self.regressed,
                "improved": self.improved, "suites": self.suites}


def difference(a: dict[str, float], b: dict[str, float], resamples: int = 2000) -> dict[str, Any]:
    """Change from scores `a` to scores `b` (task id -> score), paired where the ids match."""
    common = sorted(set(a) & set(b))
    if common:
        ci = paired_bootstrap_difference([b[k] for k in common], [a[k] for k in common], resamples)
        how = "paired"
    else:
        ci = unpaired_bootstrap_difference(list(b.values()), list(a.values()), resamples)
        how = "unpaired"
    mean = lambda xs: round(sum(xs) / len(xs), 6) if xs else None  # noqa: E731
    out = {"a_mean": mean(list(a.values())), "b_mean": mean(list(b.values())), "n_a": len(a), "n_b": len(b),
           "paired": len(common), "method": how, "diff": _r(ci.mean), "ci_low": _r(ci.low), "ci_high": _r(ci.high)}
    out["change"] = ("improved" if ci.low > 0 else "regressed" if ci.high < 0 else "unchanged") if ci.n else "n/a"
    return out


def compare_records(a: dict[str, list[ItemRecord]], b: dict[str, list[ItemRecord]], name_a: str = "A",
                    name_b: str = "B", threshold: float = 1.0, resamples: int = 2000) -> Comparison:
    cmp = Comparison(name_a, name_b)
    for spec in [s for s in a if s in b]:
        ra, rb = a[spec], b[spec]
        entry = difference(task_scores(ra, threshold), task_scores(rb, threshold), resamples)
        domains = sorted({r.domain for r in ra} | {r.domain for r in rb})
        entry["domains"] = {d: difference(task_scores([r for r in ra if r.domain == d], threshold),
                                          task_scores([r for r in rb if r.domain == d], threshold), resamples)
                            for d in domains}
        cmp.suites[spec] = entry
    cmp.regressed = [s for s, e in cmp.suites.items() if e["change"] == "regressed"]
    cmp.improved = [s for s, e in cmp.suites.items() if e["change"] == "improved"]
    if not cmp.suites:
        cmp.verdict = "no suite in common"
    elif len(cmp.regressed) == len(cmp.suites):
        cmp.verdict = "regressed"
    elif cmp.regressed:
        cmp.verdict = f"mixed: regressed on {', '.join(cmp.regressed)}"
    elif len(cmp.improved) == len(cmp.suites):
        cmp.verdict = "improved everywhere"
    elif cmp.improved:
        cmp.verdict = f"improved on {', '.join(cmp.improved)}, unchanged elsewhere"
    else:
        cmp.verdict = "no significant change"
    return cmp


def read_run(folder: str | Path) -> tuple[dict[str, Any], dict[str, list[ItemRecord]]]:
    """A run folder's summary.json and per-suite records; a one-line error when it is not a run."""
    folder = Path(folder)
    if not folder.is_dir():
        raise TemperError(f"{folder}: run folder not found")
    path = folder / "summary.json"
    if not path.is_file():
        raise TemperError(f"{folder}: not an eval run (no summary.json)")
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise TemperError(f"{path}: not valid JSON ({exc.msg})") from None
    records = {spec: load_records(folder / "suites" / slug(spec)) for spec in summary.get("suites", {})}
    return summary, records


def compare_runs(a: str | Path, b: str | Path, threshold: float | None = None, resamples: int = 2000) -> Comparison:
    """Compare two run folders (A = before, B = after)."""
    _, ra = read_run(a)
    sb, rb = read_run(b)
    if threshold is None:
        threshold = sb.get("run", {}).get("pass_threshold", 1.0)
    return compare_records(ra, rb, str(a), str(b), threshold, resamples)


def _r(x: float) -> float | None:
    return None if x != x else round(x, 6)


def compare_lines(cmp: Comparison) -> list[str]:
    lines = []
    for spec, e in cmp.suites.items():
        lines.append(f"{spec}: {_f(e['a_mean'])} -> {_f(e['b_mean'])} diff {_f(e['diff'])} "
                     f"[{_f(e['ci_low'])}, {_f(e['ci_high'])}] ({e['method']}, {e['change']})")
        if len(e["domains"]) > 1:
            lines += [f"  {d}: diff {_f(x['diff'])} [{_f(x['ci_low'])}, {_f(x['ci_high'])}] ({x['change']})"
                      for d, x in e["domains"].items()]
    lines.append(f"verdict: {cmp.verdict}")
    return lines


def write_comparison(cmp: Comparison, folder: str | Path) -> Path:
    from temper.evals.report import write_compare_report

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "compare.json").write_text(json.dumps(cmp.to_dict(), indent=2) + "\n")
    write_compare_report(folder, cmp.to_dict())
    return folder


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"
