"""`evaluate`: the library entry point behind `temper eval`, and what `temper train` calls for its
before/after and periodic evaluations.

    solver = ModelSolver.load(cfg)            # or ModelSolver(client, tokenizer, cfg), OracleSolver()
    run = await evaluate(solver, ["humaneval", (suite, held_out_tasks)], cfg, "runs/eval-0")
    run.summary["suites"]["humaneval"]["mean_reward"]
    cmp = compare_runs("runs/eval-0", "runs/eval-1")   # paired per task; cmp.verdict

`temper train` passes a `BackendSolver` (temper/orchestrator/backend_solver.py: one eval episode per
item on its rollout workers). Priority: evaluation never has more than `cfg.concurrency` items in
flight, and `gate` (a factory of async context managers, entered around each item) lets the
orchestrator run it below training: mid-training evaluations pass `gate=pipeline.low_priority`,
which grants an item a slot only while training rollouts leave one idle.
"""

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temper.evals.config import EvalConfig
from temper.evals.records import ItemRecord
from temper.evals.robustness import noise_pairs
from temper.evals.solvers import Solver
from temper.evals.suite_runner import Gate, SuiteInput, SuiteRun, resolve, run_suites
from temper.evals.summary import summarize_suite

log = logging.getLogger("temper.eval")
SUMMARY_FILE = "summary.json"


@dataclass
class EvalRun:
    out_dir: Path
    suites: dict[str, SuiteRun]
    summary: dict[str, Any]

    @property
    def records(self) -> dict[str, list[ItemRecord]]:
        return {spec: run.records for spec, run in self.suites.items()}

    @property
    def executed(self) -> int:
        return sum(r.executed for r in self.suites.values())

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.suites.values())


async def evaluate(solver: Solver, suites: Sequence[SuiteInput], cfg: EvalConfig | None = None,
                   out_dir: str | Path | None = None, *, grid: bool = False, gate: Gate | None = None,
                   report: bool = True) -> EvalRun:
    """Run every suite (and the long-context grid with `grid=True`), write per-item JSONL,
    summary.json and the report under `out_dir`, and return them. Resumes what is on disk."""
    cfg = cfg or EvalConfig.from_recipe()
    out = Path(out_dir or cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    resolved = [resolve(s) for s in suites]  # every spec is checked before any work starts
    start = time.perf_counter()
    runs = await run_suites(solver, [(suite, tasks) for _, suite, tasks in resolved], cfg, out, gate)
    by_spec = {spec: run for (spec, _, _), run in zip(resolved, runs, strict=True)}
    for run, (spec, _, _) in zip(runs, resolved, strict=True):
        run.spec = spec
    summary: dict[str, Any] = {
        "run": {"solver": getattr(solver, "name", type(solver).__name__),
                "model": getattr(solver, "model_name", None),
                "samples": cfg.samples, "temperature": cfg.agent.temperature, "pass_threshold": cfg.pass_threshold,
                "limit": cfg.limit, "start": cfg.start, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        "suites": {spec: summarize_suite(run.records, cfg.samples, cfg.pass_threshold, cfg.resamples)
                   for spec, run in by_spec.items()},
    }
    if pairs := noise_pairs({s: r.records for s, r in by_spec.items()}, cfg.pass_threshold, cfg.resamples):
        summary["robustness"] = pairs
    if grid:
        from temper.evals.curves import curves
        from temper.evals.longctx_grid import run_grid

        cells = await run_grid(solver, cfg, out / "grid", gate)
        summary["longctx_grid"] = cells.summary()
        summary["curves"] = curves(cells.records_by_length(), cfg.prices)
        for name in ("longctx_grid", "curves"):  # also on their own, for plotting scripts
            (out / f"{name}.json").write_text(json.dumps(summary[name], indent=2) + "\n")
    summary["run"]["seconds"] = round(time.perf_counter() - start, 2)
    summary["run"]["executed"] = sum(r.executed for r in runs) + (cells.executed if grid else 0)
    summary["run"]["skipped"] = sum(r.skipped for r in runs) + (cells.skipped if grid else 0)
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    if report:
        from temper.evals.report import write_run_report

        write_run_report(out, summary)
    return EvalRun(out, by_spec, summary)


async def run_eval(cfg: EvalConfig, grid: bool = False) -> EvalRun:
    """`temper eval`: check every suite spec, then start the solver (the oracle, or the model on an
    in-process engine), run, and close it."""
    from temper.errors import TemperError
    from temper.evals.model_solver import ModelSolver
    from temper.evals.solvers import OracleSolver

    if not cfg.suites and not grid:
        raise TemperError("nothing to evaluate: pass --suite SPEC (repeatable) or --grid")
    suites: list[SuiteInput] = [(suite, tasks) for _, suite, tasks in (resolve(s) for s in cfg.suites)]
    solver: Any = OracleSolver(cfg.sandbox_provider()) if cfg.oracle else ModelSolver.load(cfg)
    try:
        return await evaluate(solver, suites, cfg, cfg.out, grid=grid)
    finally:
        if hasattr(solver, "close"):
            solver.close()


def summary_lines(run: EvalRun) -> list[str]:
    """One line per suite (and for the grid), then where the results are."""
    lines = []
    for spec, e in run.summary["suites"].items():
        ks = " ".join(f"{k}={e[k]:.3f}" for k in e if k.startswith("pass@") and e[k] is not None)
        mean = "n/a" if e["mean_reward"] is None else f"{e['mean_reward']:.3f} [{e['ci_low']:.3f}, {e['ci_high']:.3f}]"
        lines.append(f"{spec}: n={e['n']} mean_reward={mean} {ks} infra_failures={e['infra_failures']}")
    for p in run.summary.get("robustness", []):
        lines.append(f"noise drop {p['clean']} -> {p['noisy']}: {p['drop']} [{p['ci_low']}, {p['ci_high']}]")
    if g := run.summary.get("longctx_grid"):
        lines.append(f"longctx grid: effective length {g['effective_length']} (NoLiMa: base score {g['base_score']}), "
                     f"{g.get('effective_length_ruler')} (RULER: >= {g.get('ruler_threshold')}), "
                     f"by length {g['by_length']}")
    lines.append(f"ran {run.summary['run']['executed']} items ({run.summary['run']['skipped']} already done); "
                 f"summary: {run.out_dir / SUMMARY_FILE}; report: {run.out_dir / 'report.html'}")
    return lines
