"""`run_envqa`: check every task of a suite, resumably, a few at a time on a warm sandbox pool.

Per-task sandbox checks (oracle x N, resource fit, negative controls, policy pass rate) append
one record per task to DIR/checks.jsonl; a rerun into DIR skips tasks whose record was made with
the same settings. The suite-wide text checks (duplicates, sensitive data, contamination) are
cheap and rerun every time. A task that fails to load or crashes a check gets `broken`, with
the error; it never stops the run.
"""

import asyncio
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from temper.envqa.checks.controls import check_controls
from temper.envqa.checks.oracle import check_oracle
from temper.envqa.checks.policy import check_policy
from temper.envqa.checks.resources import check_resources
from temper.envqa.checks.session import Clock
from temper.envqa.config import EnvQAConfig
from temper.envqa.loading import Entry, load_entries
from temper.envqa.manifest import write_manifest
from temper.envqa.report import write_report
from temper.envqa.textchecks import duplicates, eval_index, text_checks
from temper.envqa.verdicts import BAD, assemble
from temper.envs.sandboxes import make_pool
from temper.episode_runner import open_runner
from temper.errors import TemperError
from temper.sandbox import Limits, SandboxConfig

log = logging.getLogger("temper.envqa")
_TASK_KEYS = ("oracle_runs", "pass_threshold", "min_margin", "policy", "model", "samples", "agent", "too_easy_at",
              "seed")


def fingerprint(cfg: EnvQAConfig) -> str:
    """The settings a task's sandbox checks depend on: a record made with others is redone."""
    blob = json.dumps(cfg.model_dump(mode="json", include=set(_TASK_KEYS)), sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def read_records(path: Path, fp: str) -> dict[str, dict[str, Any]]:
    out = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:  # a line cut short by a kill: that task is redone
                continue
            if rec.get("fingerprint") == fp:
                out[f'{rec["id"]}@{rec["path"]}'] = rec
    return out


def _pool(entries: list[Entry], cfg: EnvQAConfig, out: Path) -> Any:
    folders = [e.suite.folders.get(e.path) for e in entries if e.suite is not None and hasattr(e.suite, "folders")]
    mem = max([1024, *(2 * f.memory_mb for f in folders if f)])  # headroom: memory fit is measured, not enforced
    disk = max([512, *(f.storage_mb for f in folders if f)])
    secs = max([600.0, *(f.agent_timeout_s for f in folders if f)])  # each exec passes the task's own timeout
    limits = Limits(wall_time_s=secs, cpu_time_s=int(secs), memory_mb=mem, disk_mb=disk)
    return make_pool(SandboxConfig(limits=limits, run_dir=out / "sandbox", task_max=cfg.task_max), size=cfg.concurrency)


async def check_task(e: Entry, pool: Any, cfg: EnvQAConfig, client: Any, tokenizer: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {"id": e.id, "path": e.path, "spec": e.spec, "checks": {}}
    if e.load_error or e.task is None or e.suite is None:
        rec["load_error"] = e.load_error or "the task did not load"
        return rec
    clock, t0 = Clock(), time.perf_counter()
    folder = getattr(e.suite, "folders", {}).get(e.path)
    try:
        oracle = await check_oracle(e.suite, e.task, pool, cfg.oracle_runs, cfg.pass_threshold, clock)
        rec["checks"]["oracle"] = oracle
        rec["checks"]["resources"] = check_resources(oracle.get("details", []), folder, cfg.min_margin)
        rec["checks"]["controls"] = await check_controls(e.suite, e.task, pool, cfg.pass_threshold, clock)
        if cfg.policy and oracle["verdict"] == "ok":  # no samples spent on a task that cannot be solved
            rec["checks"]["policy"] = await check_policy(e.suite, e.task, pool, client, tokenizer, cfg, clock)
    except Exception as exc:  # a crash in one task's checks is that task's verdict, not the run's end
        log.warning("envqa: task %s: %s: %s", e.path, type(exc).__name__, exc)
        rec["checks"].setdefault("oracle", {"verdict": "broken"})["verdict"] = "broken"
        rec["error"] = f"{type(exc).__name__}: {exc}"
    rec["timing"] = {**clock.as_dict(), "wall_s": round(time.perf_counter() - t0, 4)}
    return rec


async def run_envqa(cfg: EnvQAConfig, client: Any = None, tokenizer: Any = None,
                    console: Console | None = None) -> dict[str, Any]:
    """Check the suite `cfg.suite`; write the report and manifest under `cfg.out`; return the report."""
    out = Path(cfg.out)
    if not out.parent.is_dir():
        raise TemperError(f"--out {out}: its parent folder {out.parent} does not exist")
    suite, entries = load_entries(cfg.suite, cfg.limit)
    index = eval_index(cfg)  # before any sandbox work: a bad --against spec fails fast
    out.mkdir(exist_ok=True)
    fp = fingerprint(cfg)
    done = read_records(out / "checks.jsonl", fp)
    pending = [e for e in entries if e.key not in done]
    owned = None
    if cfg.policy and client is None and any(e.task is not None for e in pending):
        owned = open_runner(cfg.model)
        client, tokenizer = owned.client, owned.tokenizer
    pool = _pool(entries, cfg, out) if suite.needs_sandbox and pending else None
    # Each task holds one pool sandbox at a time (k while sampling): never more than the pool may keep alive.
    capacity = pool.config.pool_max // (cfg.samples if cfg.policy else 1) if pool is not None else cfg.concurrency
    sem = asyncio.Semaphore(max(1, min(cfg.concurrency, capacity)))
    t0 = time.perf_counter()
    progress = Progress(TextColumn("envqa {task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), TextColumn("{task.fields[last]}"),
                        console=console or Console(stderr=True), transient=False)
    try:
        with progress, (out / "checks.jsonl").open("a") as store:
            bar = progress.add_task(cfg.suite[:40], total=len(entries), completed=len(entries) - len(pending),
                                    last="")

            async def one(e: Entry) -> None:
                async with sem:
                    rec = await check_task(e, pool, cfg, client, tokenizer)
                rec["fingerprint"] = fp
                store.write(json.dumps(rec) + "\n")
                store.flush()
                done[e.key] = rec
                progress.update(bar, advance=1, last=f"{Path(e.path).name}: {', '.join(assemble(rec))}")

            await asyncio.gather(*(one(e) for e in pending))
    finally:
        pool_stats = dict(pool.stats) if pool is not None else {}
        if pool is not None:
            pool.close()
        if owned is not None:
            owned.close()
    wall = time.perf_counter() - t0
    records = {e.key: dict(done[e.key], waived=e.waived) for e in entries}
    for e in entries:
        records[e.key]["checks"].update(text_checks(e, index))
    # Keepers: a clean task before a flawed copy of it, then suite order.
    order = sorted(records, key=lambda k: any(v in BAD for v in assemble(records[k])))
    clusters = duplicates(entries, order, cfg)
    for c in clusters:
        for m in c.members[1:]:
            records[m]["checks"]["duplicates"] = {"duplicate_of": records[c.keeper]["path"],
                                                  "kind": "exact" if m in c.exact else "near",
                                                  "cluster_similarity": c.similarity}
    records = list(records.values())
    for rec in records:
        rec["verdicts"] = assemble(rec)
    report = write_report(out, cfg, records, clusters, entries, wall, executed=len(pending), pool=pool_stats)
    write_manifest(out, cfg, records, entries)
    return report
