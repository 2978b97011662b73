"""The report: DIR/report.json (what scripts read), DIR/tasks/<name>.json (every check, figures and
logs of one task), DIR/summary.md and summary.html (counts per verdict, flagged tasks, duplicate
clusters, throughput), DIR/pass_rates.png (histogram) and DIR/clusters.json."""

import html
import json
import re
from pathlib import Path
from typing import Any

from temper.envqa.config import EnvQAConfig
from temper.envqa.dedup import Cluster
from temper.envqa.loading import Entry
from temper.envqa.verdicts import VERDICTS


def _name(rec: dict[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{Path(rec['path']).name}-{rec['id']}")[:120]


def compact(rec: dict[str, Any]) -> dict[str, Any]:
    """A task's line in report.json: verdicts and headline figures (the task file has the rest)."""
    c = rec["checks"]
    pol, res, oracle = c.get("policy") or {}, c.get("resources") or {}, c.get("oracle") or {}
    out = {"id": rec["id"], "path": rec["path"], "verdicts": rec["verdicts"], "spec": rec.get("spec", ""),
           "oracle": {k: oracle[k] for k in ("verdict", "passes", "runs", "agree") if k in oracle},
           "pass_rate": pol.get("pass_rate"), "ci": pol.get("ci"), "samples": pol.get("samples"),
           "passes": pol.get("passes"), "zero_variance": pol.get("zero_variance"),
           "time_margin": res.get("time_margin"), "memory_margin": res.get("memory_margin"),
           "trivial": (c.get("controls") or {}).get("trivial"), "hackable": (c.get("controls") or {}).get("hackable"),
           "duplicate_of": (c.get("duplicates") or {}).get("duplicate_of"),
           "contamination": (c.get("contamination") or {}).get("overlaps", [])[:1],
           "sensitive": (c.get("sensitive") or {}).get("findings", []), "waived": rec.get("waived", []),
           "file": f"tasks/{_name(rec)}.json"}
    for key in ("load_error", "error"):
        if rec.get(key):
            out[key] = rec[key]
    return out


def summarise(records: list[dict[str, Any]], wall_s: float, executed: int) -> dict[str, Any]:
    counts = {v: sum(v in r["verdicts"] for r in records) for v in VERDICTS}
    timed = [r["timing"] for r in records if r.get("timing")]
    startup, work = sum(t["startup_s"] for t in timed), sum(t["work_s"] for t in timed)
    groups = [r["checks"]["policy"]["zero_variance"] for r in records
              if (r["checks"].get("policy") or {}).get("zero_variance") is not None]
    return {"tasks": len(records), "counts": counts, "executed": executed, "wall_s": round(wall_s, 3),
            "tasks_per_minute": round(60 * executed / wall_s, 2) if executed and wall_s > 0 else None,
            "startup_s": round(startup, 3), "work_s": round(work, 3),
            "startup_share": round(startup / (startup + work), 4) if startup + work > 0 else None,
            "reward_sparsity": round(sum(groups) / len(groups), 4) if groups else None}


def plot_pass_rates(path: Path, rates: list[float]) -> None:
    from temper.runtime import pyplot

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(6, 3.5))
    if rates:
        ax.hist(rates, bins=[i / 10 for i in range(11)], color="#4a7ab7", edgecolor="white")
    else:
        ax.text(0.5, 0.5, "no policy pass rates (run without --no-policy)", ha="center", va="center")
    ax.set(xlabel="pass rate", ylabel="tasks", title=f"Policy pass rate per task ({len(rates)} tasks)", xlim=(0, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(cfg: EnvQAConfig, summary: dict[str, Any], tasks: list[dict[str, Any]],
             clusters: list[dict[str, Any]]) -> str:
    lines = [f"# Environment QA: `{cfg.suite}`", "",
             f"{summary['tasks']} tasks; {summary['executed']} checked in this run in {summary['wall_s']:.1f} s "
             f"({summary['tasks_per_minute']} tasks/min); sandbox start-up share {summary['startup_share']}; "
             f"reward sparsity {summary['reward_sparsity']}.", "", "| verdict | tasks |", "|---|---|"]
    lines += [f"| {v} | {n} |" for v, n in summary["counts"].items() if n]
    lines += ["", "![pass rates](pass_rates.png)", "", "## Flagged tasks", ""]
    flagged = [t for t in tasks if "ok" not in t["verdicts"]]
    lines += [f"- `{t['path']}`: {', '.join(t['verdicts'])}" + (f" ({t.get('load_error') or t.get('error')})"
                                                                if t.get("load_error") or t.get("error") else "")
              for t in flagged] or ["none"]
    lines += ["", "## Duplicate clusters", ""]
    lines += [f"- {c['kind']} (Jaccard >= {c['similarity']}): keep `{c['keeper']}`; drop "
              + ", ".join(f"`{m}`" for m in c["members"][1:]) for c in clusters] or ["none"]
    return "\n".join(lines) + "\n"


def to_html(md: str) -> str:
    """The Markdown summary as a plain HTML page (tables and lists kept readable, no dependency)."""
    body = []
    for line in md.splitlines():
        esc = html.escape(line)
        if line.startswith("# "):
            body.append(f"<h1>{esc[2:]}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{esc[3:]}</h2>")
        elif line.startswith("|") and not line.startswith("|---"):
            cells = "".join(f"<td>{html.escape(c.strip())}</td>" for c in line.strip("|").split("|"))
            body.append(f"<tr>{cells}</tr>")
        elif line.startswith("- "):
            body.append(f"<li>{esc[2:]}</li>")
        elif line.startswith("!["):
            body.append('<img src="pass_rates.png" alt="pass rates">')
        elif line.strip():
            body.append(f"<p>{esc}</p>")
    return "<!doctype html><meta charset='utf-8'><title>envqa</title><body>" + "\n".join(body) + "</body>\n"


def write_report(out: Path, cfg: EnvQAConfig, records: list[dict[str, Any]], clusters: list[Cluster],
                 entries: list[Entry], wall_s: float, executed: int, pool: dict[str, int] | None = None
                 ) -> dict[str, Any]:
    paths = {e.key: e.path for e in entries}
    (out / "tasks").mkdir(exist_ok=True)
    for rec in records:
        (out / "tasks" / f"{_name(rec)}.json").write_text(json.dumps(rec, indent=1, default=str))
    tasks = [compact(r) for r in records]
    cl = [{"keeper": paths[c.keeper], "members": [paths[m] for m in c.members], "kind": c.kind,
           "similarity": c.similarity, "exact": [paths[m] for m in c.exact]} for c in clusters]
    summary = {**summarise(records, wall_s, executed), "pool": pool or {}}  # warm/cold acquisitions
    report = {"suite": cfg.suite, "config": cfg.model_dump(), "summary": summary, "clusters": cl, "tasks": tasks}
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    (out / "clusters.json").write_text(json.dumps(cl, indent=1))
    md = markdown(cfg, summary, tasks, cl)
    (out / "summary.md").write_text(md)
    (out / "summary.html").write_text(to_html(md))
    plot_pass_rates(out / "pass_rates.png", [t["pass_rate"] for t in tasks if t["pass_rate"] is not None])
    return report
