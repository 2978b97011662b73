"""The dashboard's evaluation, comparison and environment-QA pages (registered on the app by `register`).

    GET /eval?f=KEY              scores with CIs per suite and domain, tool calls, usage, long-context grid, curves
    GET /compare?a=KEY&b=KEY     `temper compare` of two eval folders (temper.evals.compare.compare_runs)
    GET /envqa?f=KEY[&verdict=]  an envqa report: tasks with verdicts and flags, pass-rate histogram, clusters
    GET /api/envqa/evidence?f=KEY&i=N   one task's tasks/<name>.json, loaded when its row is expanded

Every page reads its folder afresh and only reads. A folder whose main file (summary.json, report.json) is
not valid JSON may not be recognised by folders.kind_of (it is when its suites/ or tasks/ folder is there),
so `_folder` looks at that file first, to name it in the one-line answer instead of "not an eval folder".
"""

from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from temper.dashboard import envqa_folder as qa
from temper.dashboard import eval_folder as ev
from temper.dashboard.app import Dashboard, PageError
from temper.dashboard.folders import Folder, discover, kind_of, resolve

MAIN_FILE = {"eval": "summary.json", "envqa": "report.json"}


def _folder(dash: Dashboard, key: str, want: str) -> tuple[Path, dict[str, Any]]:
    """The folder `key` names, and its main file's JSON object; a PageError (one line) otherwise."""
    path = resolve(dash.roots, key)
    main = MAIN_FILE[want]
    if path is not None and path.is_dir() and kind_of(path) is None and (path / main).is_file():
        data, problem = ev.load_json(path / main)
        if problem:
            raise PageError(422, problem)
    path = dash.folder(key, want)
    data, problem = ev.load_json(path / main)
    if problem or not isinstance(data, dict):  # replaced between the two reads
        raise PageError(422, problem or f"{path / main}: not a JSON object")
    return path, data


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _run_key(dash: Dashboard, key: str) -> str | None:
    """The train run an eval folder belongs to (RUN/eval/NAME), for the nav link."""
    parts = key.split("/")
    if len(parts) >= 4 and parts[-2] == "eval":
        run = "/".join(parts[:-2])
        path = resolve(dash.roots, run)
        if path is not None and kind_of(path) == "run":
            return run
    return None


def _partner(me: Folder | None, evals: list[Folder]) -> tuple[str | None, str | None]:
    """Default (A, B) of the compare form: this folder and a sibling eval folder, `before` as A."""
    if me is None:
        return None, None
    others = [e for e in evals if e.key != me.key]
    siblings = [e for e in others if e.path.parent == me.path.parent] or others
    if not siblings:
        return me.key, None
    other = siblings[-1] if me.path.name == "before" else siblings[0]
    return (other.key, me.key) if other.path.name == "before" else (me.key, other.key)


def _compare(a: Path, b: Path) -> dict[str, Any]:
    from temper.errors import TemperError
    from temper.evals.compare import compare_runs

    try:
        return compare_runs(a, b).to_dict()
    except (TemperError, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise PageError(422, f"compare {a} with {b}: {exc}") from None


def register(app: FastAPI, dash: Dashboard) -> None:
    @app.get("/eval", response_class=HTMLResponse)
    def eval_page(request: Request, f: str) -> HTMLResponse:
        path, summary = _folder(dash, f, "eval")
        rows, problems = ev.suite_rows(summary)
        lo, hi = ev.ci_scale(rows)
        for r in rows:
            for x in (r, *r["domains"]):
                x["bar"] = ev.bar(x["mean"], x["low"], x["high"], lo, hi)
        ks = sorted({k for r in rows for k in r["pass"]})
        grid, grid_problem = ev.section(path, summary, "longctx_grid")
        curves, curves_problem = ev.section(path, summary, "curves")
        curve_charts, points = ev.curve_charts(curves) if curves else ([], [])
        evals = [e for e in discover(dash.roots) if e.kind == "eval"]
        me = next((e for e in evals if e.path == path), None)
        a, b = _partner(me, evals)
        return dash.render(request, "eval.html", key=f, path=path, run=_dict(summary.get("run")), rows=rows, ks=ks,
                           scale=(lo, hi), problems=[p for p in (*problems, grid_problem, curves_problem) if p],
                           robustness=[x for x in summary.get("robustness") or [] if isinstance(x, dict)],
                           heat=ev.heatmap(grid) if grid else None, grid_charts=ev.grid_charts(grid) if grid else [],
                           curve_charts=curve_charts, points=points, evals=evals, pick_a=a, pick_b=b,
                           run_key=_run_key(dash, f))

    @app.get("/compare", response_class=HTMLResponse)
    def compare_page(request: Request, a: str, b: str) -> HTMLResponse:
        pa, sa = _folder(dash, a, "eval")
        pb, sb = _folder(dash, b, "eval")
        cmp = _compare(pa, pb)
        suites = cmp["suites"]
        only_a = [s for s in _dict(sa.get("suites")) if s not in suites]
        only_b = [s for s in _dict(sb.get("suites")) if s not in suites]
        bounds = [abs(v) for e in suites.values() for x in (e, *e["domains"].values())
                  for v in (x["ci_low"], x["ci_high"], x["diff"]) if v is not None]
        m = max([0.05, *bounds])
        rows = []
        for i, (spec, e) in enumerate(suites.items(), start=1):
            domains = [{"name": d, **x, "bar": ev.bar(x["diff"], x["ci_low"], x["ci_high"], -m, m)}
                       for d, x in e["domains"].items()] if len(e["domains"]) > 1 else []
            rows.append({"index": i, "name": spec, **e, "bar": ev.bar(e["diff"], e["ci_low"], e["ci_high"], -m, m),
                         "domain_rows": domains})
        chart = {"kind": "groups", "title": "mean reward per suite", "names": [r["name"] for r in rows],
                 "ys": [[r["a_mean"] for r in rows], [r["b_mean"] for r in rows]], "labels": ["A", "B"]}
        return dash.render(request, "compare.html", a=a, b=b, pa=pa, pb=pb, run_a=_dict(sa.get("run")),
                           run_b=_dict(sb.get("run")), cmp=cmp, rows=rows, chart=chart, scale=m,
                           only_a=only_a, only_b=only_b, evals=[e for e in discover(dash.roots) if e.kind == "eval"])

    @app.get("/envqa", response_class=HTMLResponse)
    def envqa_page(request: Request, f: str, verdict: str | None = None) -> HTMLResponse:
        path, report = _folder(dash, f, "envqa")
        rows, problems = qa.task_rows(report)
        clusters, cluster_problem = qa.clusters(path, rows)
        summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
        counts = {v: n for v, n in (summary.get("counts") or {}).items() if n} if isinstance(
            summary.get("counts"), dict) else {}
        shown = [r for r in rows if verdict in r["verdicts"]] if verdict else rows
        return dash.render(request, "envqa.html", key=f, path=path, report=report, summary=summary, counts=counts,
                           rows=shown, total=len(rows), verdict=verdict, hist=qa.histogram(rows),
                           clusters=clusters, problems=[p for p in (*problems, cluster_problem) if p])

    @app.get("/api/envqa/evidence")
    def evidence_api(f: str, i: int) -> JSONResponse:
        try:
            path, report = _folder(dash, f, "envqa")
        except PageError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        data, problem = qa.evidence(path, report, i)
        if problem:
            return JSONResponse({"error": problem}, status_code=404)
        return JSONResponse({"evidence": data})
