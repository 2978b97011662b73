"""`temper dashboard`'s web app: server-rendered pages (FastAPI + Jinja2) over run, eval and envqa folders,
with charts drawn by the vendored uPlot and refreshed from small JSON routes while a run writes.

Folders are named by `?f=<root index>/<path under the root>` (folders.py). Every page reads its folder
afresh, read-only; a folder that is not what the page wants, a corrupt line or a missing store is one line
on the page, never a crash. Eval and envqa pages are in eval_pages.py.
"""

import json
import time
from pathlib import Path
from typing import Any

import yaml
from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from temper.dashboard import store_query
from temper.dashboard.episode_view import advantage, run_tokenizer, spans
from temper.dashboard.folders import Folder, discover, kind_of, resolve
from temper.dashboard.run_folder import RunFolder, numeric_series
from temper.trajectory import SCREENSHOT

HERE = Path(__file__).parent


class PageError(Exception):
    """A request the page cannot answer: shown as one line with this status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Dashboard:
    def __init__(self, roots: list[Path]):
        self.roots = [Path(r) for r in roots]
        self.templates = Jinja2Templates(directory=HERE / "templates")
        self.templates.env.filters["num"] = _num
        # JSON shown as text (autoescaped by the page), unlike tojson's script-safe \u003c escapes
        self.templates.env.filters["pretty"] = lambda x: json.dumps(x, indent=1, ensure_ascii=False, default=str)
        self.templates.env.filters["timestamp"] = lambda t: time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t))

    def folder(self, key: str, want: str) -> Path:
        path = resolve(self.roots, key)
        if path is None or not path.is_dir():
            raise PageError(404, f"{key}: no such folder under {', '.join(map(str, self.roots))}")
        kind = kind_of(path)
        if kind != want:
            what = f"{_a(kind)} {kind} folder" if kind else "not a run, eval or envqa folder"
            raise PageError(404, f"{path}: {what}, not {_a(want)} {want} folder")
        return path

    def render(self, request: Request, template: str, **context: Any) -> HTMLResponse:
        return self.templates.TemplateResponse(request, template, {"roots": self.roots, **context})


def _a(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _num(x: Any, digits: int = 3) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "—" if x is None else str(x)
    return f"{x:,}" if isinstance(x, int) else f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:,.0f}"


def create_app(roots: list[Path]) -> FastAPI:
    from temper.dashboard import eval_pages

    dash = Dashboard(roots)
    app = FastAPI(title="temper dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.exception_handler(PageError)
    async def page_error(request: Request, exc: PageError) -> HTMLResponse:
        response = dash.render(request, "error.html", message=str(exc))
        response.status_code = exc.status
        return response

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> HTMLResponse:
        folders = discover(dash.roots)
        runs = [_run_row(f) for f in folders if f.kind == "run"]
        missing = [str(r) for r in dash.roots if not r.is_dir()]
        return dash.render(request, "index.html", runs=runs, missing=missing,
                           evals=[f for f in folders if f.kind == "eval"],
                           envqa=[f for f in folders if f.kind == "envqa"])

    @app.get("/run", response_class=HTMLResponse)
    def run_page(request: Request, f: str) -> HTMLResponse:
        run = RunFolder(dash.folder(f, "run"))
        metrics, audit = run.metrics(), run.audit()
        quarantine: list[dict[str, Any]] = []
        store_problem = None
        try:
            quarantine = store_query.quarantined(run.path / "store.sqlite")
        except store_query.StoreError as exc:
            store_problem = str(exc)
        config = run.config()
        return dash.render(request, "run.html", key=f, run=run, status=run.status(), config=config,
                           config_yaml=yaml.safe_dump(config, sort_keys=False), steps=len(metrics.rows),
                           problems=metrics.problems + audit.problems, audit=audit.rows[-200:],
                           evals=run.before_after(), quarantine=quarantine, store_problem=store_problem,
                           evals_inside=[e for e in discover([run.path]) if e.kind == "eval"])

    @app.get("/api/metrics")
    def metrics_api(f: str, since: int = 0) -> JSONResponse:
        try:
            run = RunFolder(dash.folder(f, "run"))
        except PageError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        m = run.metrics(since)
        return JSONResponse({"since": since, "series": numeric_series(m.rows), "rows": len(m.rows),
                             "problems": m.problems, "status": run.status()})

    @app.get("/episodes", response_class=HTMLResponse)
    def episodes_page(request: Request, f: str, status: str | None = None, task: str | None = None,
                      domain: str | None = None, failure: str | None = None, step: str | None = None,
                      min_reward: str | None = None, max_reward: str | None = None,
                      before: int | None = None) -> HTMLResponse:
        run = RunFolder(dash.folder(f, "run"))
        filters = store_query.Filters(status or None, task or None, domain or None, failure or None,
                                      _opt(step, int, "step"), _opt(min_reward, float, "min_reward"),
                                      _opt(max_reward, float, "max_reward"))
        store = run.path / "store.sqlite"
        try:
            result, facets = store_query.page(store, filters, before), store_query.facets(store)
        except store_query.StoreError as exc:
            raise PageError(404, str(exc)) from None
        query = {k: v for k, v in (("status", status), ("task", task), ("domain", domain), ("failure", failure),
                                   ("step", step), ("min_reward", min_reward), ("max_reward", max_reward)) if v}
        return dash.render(request, "episodes.html", key=f, page=result, facets=facets, query=query)

    @app.get("/episode", response_class=HTMLResponse)
    def episode_page(request: Request, f: str, id: str) -> HTMLResponse:
        run = RunFolder(dash.folder(f, "run"))
        store = run.path / "store.sqlite"
        try:
            row = store_query.episode(store, id)
            group = store_query.group(store, row["group_id"]) if row else []
        except store_query.StoreError as exc:
            raise PageError(404, str(exc)) from None
        if row is None:
            raise PageError(404, f"{store}: no episode {id!r}")
        traj = row["trajectory"]
        if traj is None:
            raise PageError(404, f"{store}: episode {id!r} is still in flight (no trajectory yet)")
        config = run.config()
        adv = advantage(config, group, id)
        tok = run_tokenizer(run.path, config)
        return dash.render(request, "episode.html", key=f, row=row, traj=traj, adv=adv, group=group,
                           spans=spans(traj, tok, adv), decoded=tok is not None,
                           actions=(traj.get("info") or {}).get("actions", []),
                           screenshot=(traj.get("info") or {}).get(SCREENSHOT),
                           info={k: v for k, v in (traj.get("info") or {}).items() if k != SCREENSHOT})

    eval_pages.register(app, dash)
    return app


def _opt(value: str | None, cast: type, name: str) -> Any:
    if value in (None, ""):
        return None
    try:
        return cast(value)
    except ValueError:
        raise PageError(400, f"filter {name}={value!r}: not a {cast.__name__}") from None


def _run_row(folder: Folder) -> dict[str, Any]:
    run = RunFolder(folder.path)
    m = run.metrics()
    last = m.rows[-1] if m.rows else {}
    return {"folder": folder, "status": run.status(), "steps": len(m.rows), "reward": last.get("reward"),
            "model": run.config().get("model"), "evals": run.before_after(), "problems": m.problems}
