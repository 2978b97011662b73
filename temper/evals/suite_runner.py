"""Run a suite's items through a solver: concurrent, resumable, with live progress.

Items are (task, sample index) pairs. Finished items are read back from the suite's items.jsonl
and skipped, so a run killed at any point picks up where it stopped. An exception raised while
solving an item is an infrastructure failure of that item (recorded, never a wrong answer).
"""

import asyncio
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from temper.envs.registry import parse_spec
from temper.envs.reward import Reward
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.evals.config import EvalConfig
from temper.evals.metering import PeakMemory
from temper.evals.records import ItemRecord, ItemStore, base_id
from temper.evals.solvers import Outcome, Solver
from temper.trajectory import FailureKind

# What `evaluate` accepts as a suite: a spec, a Suite, or a Suite with a chosen list of its tasks.
SuiteInput = str | Suite | tuple[Suite, list[Task]]
# Entered around each item (after the concurrency slot): the orchestrator's hook to run evaluation
# below training rollouts, e.g. `gate=pipeline.low_priority`, an async context manager factory.
Gate = Callable[[], AbstractAsyncContextManager[object]]
BATCH = 32  # items per call of a solver that scores in batches (the oracle)


@dataclass
class SuiteRun:
    spec: str
    folder: Path
    records: list[ItemRecord]
    executed: int  # items solved in this call (the rest were already on disk)
    skipped: int


def slug(spec: str) -> str:
    """A folder name for a suite spec (specs contain ':', '=', ',' and parentheses)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_")[:120] or "suite"


def resolve(item: SuiteInput) -> tuple[str, Suite, list[Task]]:
    if isinstance(item, str):
        suite = parse_spec(item)
        return item, suite, suite.tasks()
    if isinstance(item, tuple):
        suite, tasks = item
        return suite.spec or suite.name, suite, list(tasks)
    return item.spec or item.name, item, item.tasks()


def record_of(spec: str, task: Task, sample: int, out: Outcome, latency: float, peak: float | None,
              cfg: EvalConfig) -> ItemRecord:
    r = out.reward
    return ItemRecord(
        suite=spec, task_id=task.id, sample=sample, domain=task.domain, reward=float(r.value),
        components=dict(r.components), failure=r.failure.value if r.failure else None,
        error=str(r.info["error"])[:2000] if r.info.get("error") else None, prompt=task.prompt, output=out.output,
        tokens_in=out.tokens_in, tokens_out=out.tokens_out, latency_s=round(latency, 4), ttft_s=out.ttft_s,
        tpot_s=out.tpot_s, peak_mem_mb=peak, cost=cfg.prices.cost(out.tokens_in, out.tokens_out), turns=out.turns,
        base_id=base_id(task), tags=list(task.tags), info=out.info,
    )


async def run_suite(solver: Solver, item: SuiteInput, cfg: EvalConfig, folder: Path, progress: Any = None,
                    gate: Gate | None = None) -> SuiteRun:
    spec, suite, tasks = resolve(item)
    tasks = tasks[cfg.start:]
    if cfg.limit is not None:
        tasks = tasks[: cfg.limit]
    store = ItemStore(folder)
    done = store.load()
    wanted = [(t, s) for t in tasks for s in range(cfg.samples)]
    keys = {(t.id, s) for t, s in wanted}
    todo = [(t, s) for t, s in wanted
            if (t.id, s) not in done or (cfg.retry_failures and not done[(t.id, s)].ok)]
    bar = progress.add_task(spec[:40], total=len(wanted), completed=len(wanted) - len(todo)) if progress else None
    sem = asyncio.Semaphore(cfg.concurrency)
    batched = bool(getattr(solver, "batches", lambda _: False)(suite))
    units = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)] if batched else [[x] for x in todo]

    async def one(unit: list[tuple[Task, int]]) -> None:
        async with sem, (gate() if gate is not None else nullcontext()):
            start = time.perf_counter()
            with PeakMemory() as mem:
                outcomes = await _solve(solver, suite, unit, batched)
            latency = (time.perf_counter() - start) / len(unit)
            records = [record_of(spec, t, s, o, latency, round(mem.peak_mb, 1), cfg)
                       for (t, s), o in zip(unit, outcomes, strict=True)]
            store.append(records)
            for r in records:
                done[r.key] = r
            if progress is not None:
                progress.advance(bar, len(unit))

    await asyncio.gather(*(one(u) for u in units))
    records = [r for k, r in done.items() if k in keys]
    return SuiteRun(spec, folder, records, executed=len(todo), skipped=len(wanted) - len(todo))


async def _solve(solver: Solver, suite: Suite, unit: list[tuple[Task, int]], batched: bool) -> list[Outcome]:
    try:
        if batched:
            return await solver.solve_batch(suite, unit)  # type: ignore[attr-defined]
        return [await solver.solve(suite, *unit[0])]
    except Exception as exc:  # the harness broke, not the answer: every item of the unit is a failure
        why = f"{type(exc).__name__}: {exc}"
        return [Outcome(Reward.infra(FailureKind.WORKER_ERROR, why)) for _ in unit]


def live_progress(enabled: bool) -> Any:
    if not enabled:
        return nullcontext(None)
    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=Console(stderr=True), transient=False)


async def run_suites(solver: Solver, suites: Sequence[SuiteInput], cfg: EvalConfig, out_dir: Path,
                     gate: Gate | None = None) -> list[SuiteRun]:
    """Every suite under `out_dir/suites/<slug>/`, one after another, items concurrent within each."""
    runs = []
    with live_progress(cfg.progress) as progress:
        for item in suites:
            spec = resolve(item)[0] if not isinstance(item, str) else item
            runs.append(await run_suite(solver, item, cfg, out_dir / "suites" / slug(spec), progress, gate))
    return runs
