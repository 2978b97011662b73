"""Before/after evaluation on held-out tasks: one greedy episode per task through the same
rollout workers, scored on correctness only, with bootstrap CIs (temper.evals.stats)."""

from dataclasses import asdict, dataclass
from typing import Any

from temper.evals.stats import bootstrap_mean, paired_bootstrap_difference
from temper.orchestrator.backends import Backend
from temper.orchestrator.pipeline import run_eval


@dataclass
class EvalResult:
    n: int
    mean_reward: float
    ci_low: float
    ci_high: float
    failed: int  # infrastructure failures, left out (never scored 0)
    scores: list[float | None]  # per task, in task order (None: failed)

    def summary(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("scores")
        return d


def score(attempt: Any, metric: str) -> float | None:
    if attempt.failure is not None or not attempt.trajectories:
        return None
    t = attempt.trajectories[-1]
    return float(t.reward_components.get(metric, t.reward))


async def evaluate(backend: Backend, suite_index: int, task_ids: list[str], metric: str, concurrency: int,
                   on_done: Any = None, gate: Any = None) -> EvalResult:
    attempts = await run_eval(backend, suite_index, task_ids, concurrency, on_done, gate)
    scores = [score(a, metric) for a in attempts]
    ok = [s for s in scores if s is not None]
    ci = bootstrap_mean(ok)
    return EvalResult(ci.n, ci.mean, ci.low, ci.high, len(scores) - len(ok), scores)


def difference(after: EvalResult, before: EvalResult) -> dict[str, float]:
    """Paired bootstrap of after - before over the tasks both scored."""
    pairs = [(a, b) for a, b in zip(after.scores, before.scores, strict=True) if a is not None and b is not None]
    ci = paired_bootstrap_difference([a for a, _ in pairs], [b for _, b in pairs])
    return {"n": ci.n, "mean": ci.mean, "ci_low": ci.low, "ci_high": ci.high,
            "significant": bool(ci.n and (ci.low > 0 or ci.high < 0))}
