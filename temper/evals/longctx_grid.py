"""The long-context grid: `longctx` tasks at every (context length, depth of the key information)
cell. From it: accuracy per cell (the heatmap), accuracy per length, the effective context length,
and the lost-in-the-middle profile (accuracy by depth).

Effective context length, by both definitions in use: NoLiMa's relative one (`effective_length`), the longest
length L such that the score at every length up to L stays >= `threshold` (0.85) x the score at the shortest
length, undefined (null) when that score is 0 (a model that cannot do the task at all); and RULER's absolute
one (`effective_length_ruler`), the longest L such that the score at every length up to L stays >=
`ruler_threshold` (0.856: Llama-2-7B's score at 4K, RULER's bar), null when even the shortest misses it.
Every cell and length carries a 95% bootstrap interval of its mean.
Only `niah` and `vartrack` place their key information at the cell's depth (`multi_niah` spreads
its needles, `freq` has none), so the depth profile uses those two; the heatmap uses all kinds.
"""

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.envs.registry import parse_spec
from temper.evals.config import EvalConfig, GridConfig
from temper.evals.records import ItemRecord
from temper.evals.solvers import Solver
from temper.evals.stats import bootstrap_mean
from temper.evals.suite_runner import Gate, run_suite, slug

DEPTH_KINDS = ("niah", "vartrack")


@dataclass
class Cell:
    length: int
    depth: float
    kind: str
    spec: str
    records: list[ItemRecord] = field(default_factory=list)


def cell_specs(g: GridConfig) -> list[Cell]:
    per_kind = max(1, math.ceil(g.n / len(g.tasks)))
    return [Cell(length, depth, kind, f"longctx:task={kind},length={length},depth={depth:g},n={per_kind},"
                 f"seed={g.seed},haystack={g.haystack}")
            for length in g.lengths for depth in g.depths for kind in g.tasks]


def _mean(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 6) if xs else None


def effective_length(by_length: dict[int, float | None], threshold: float, absolute: bool = False) -> int | None:
    """The longest length up to which every score stays >= threshold x the shortest length's score (NoLiMa), or
    >= threshold itself (`absolute`: RULER)."""
    lengths = sorted(by_length)
    if not lengths or (not absolute and not by_length[lengths[0]]):
        return None
    bar, best = threshold if absolute else threshold * by_length[lengths[0]], None
    for length in lengths:
        score = by_length[length]
        if score is None or score < bar:
            break
        best = length
    return best


def _interval(xs: list[float]) -> list[float] | None:
    if not xs:
        return None
    ci = bootstrap_mean(xs)
    return [round(ci.low, 4), round(ci.high, 4)]


@dataclass
class GridRun:
    config: GridConfig
    cells: list[Cell]
    executed: int = 0
    skipped: int = 0

    def scores(self, pick: Any = None) -> dict[tuple[int, float], list[float]]:
        out: dict[tuple[int, float], list[float]] = defaultdict(list)
        for c in self.cells:
            if pick is None or c.kind in pick:
                out[(c.length, c.depth)] += [r.reward for r in c.records if r.ok]
        return out

    def records_by_length(self) -> dict[int, list[ItemRecord]]:
        out: dict[int, list[ItemRecord]] = defaultdict(list)
        for c in self.cells:
            out[c.length] += c.records
        return dict(sorted(out.items()))

    def summary(self) -> dict[str, Any]:
        g = self.config
        all_scores = self.scores()
        length_scores = {L: [x for d in g.depths for x in all_scores[(L, d)]] for L in g.lengths}
        by_length = {L: _mean(xs) for L, xs in length_scores.items()}
        depth_kinds = [k for k in g.tasks if k in DEPTH_KINDS]
        depth_scores = self.scores(depth_kinds)
        by_kind: dict[str, dict[str, float | None]] = {}
        for kind in g.tasks:
            ks = self.scores([kind])
            by_kind[kind] = {str(L): _mean([x for d in g.depths for x in ks[(L, d)]]) for L in g.lengths}
        tokens = {str(L): _mean([float(r.tokens_in) for r in rs if r.ok and r.tokens_in])
                  for L, rs in self.records_by_length().items()}
        return {
            "lengths": g.lengths, "depths": g.depths, "kinds": g.tasks, "n_per_cell": g.n,
            "accuracy": [[_mean(all_scores[(L, d)]) for d in g.depths] for L in g.lengths],
            "accuracy_ci": [[_interval(all_scores[(L, d)]) for d in g.depths] for L in g.lengths],
            "items_per_cell": [[len(all_scores[(L, d)]) for d in g.depths] for L in g.lengths],
            "by_length": {str(L): s for L, s in by_length.items()},
            "by_length_ci": {str(L): _interval(xs) for L, xs in length_scores.items()},
            "by_kind": by_kind,
            "depth_profile": {f"{d:g}": _mean([x for L in g.lengths for x in depth_scores[(L, d)]]) for d in g.depths},
            "depth_profile_kinds": depth_kinds,
            "threshold": g.threshold,
            "base_score": by_length[min(g.lengths)] if g.lengths else None,
            "effective_length": effective_length(by_length, g.threshold),
            "ruler_threshold": g.ruler_threshold,
            "effective_length_ruler": effective_length(by_length, g.ruler_threshold, absolute=True),
            "prompt_tokens": tokens,  # measured prompt tokens per length (the lengths are ~4-character tokens)
            "infra_failures": sum(not r.ok for c in self.cells for r in c.records),
        }


async def run_grid(solver: Solver, cfg: EvalConfig, out_dir: Path, gate: Gate | None = None) -> GridRun:
    """Every cell, shortest lengths first (resumable like any suite: cells live under out_dir)."""
    g = cfg.grid
    cells = cell_specs(g)
    cell_cfg = cfg.model_copy(update={"samples": 1, "limit": None, "start": 0,
                                     "concurrency": g.concurrency})
    from temper.evals.suite_runner import live_progress

    run = GridRun(g, cells)
    with live_progress(cfg.progress) as progress:
        for c in cells:
            suite = parse_spec(c.spec)
            sr = await run_suite(solver, (suite, suite.tasks()), cell_cfg, out_dir / slug(c.spec), progress, gate)
            c.records = sr.records
            run.executed += sr.executed
            run.skipped += sr.skipped
    return run
