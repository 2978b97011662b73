"""Policy pass rate: k samples of the given model on the task (one GRPO group), through the agent
loop on the warm pool. Pass rate with a bootstrap CI (temper.evals.stats), a difficulty stratum
(`too-easy` >= too_easy_at, `too-hard` 0 of k, else `learnable`) and whether the group's rewards
have zero variance (such a group gives GRPO no signal; the suite's share of them is its sparsity)."""

import asyncio
from typing import Any

from temper.agent.runner import sample_seed
from temper.envqa.checks.session import Clock
from temper.envqa.config import EnvQAConfig
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.episode_runner import run_episode
from temper.evals.stats import bootstrap_mean


def stratum(passes: int, k: int, too_easy_at: float) -> str:
    if passes == 0:
        return "too-hard"
    return "too-easy" if passes / k >= too_easy_at else "learnable"


def summarise(rewards: list[float], failures: int, cfg: EnvQAConfig) -> dict[str, Any]:
    k = len(rewards)
    passes = sum(r >= cfg.pass_threshold for r in rewards)
    out: dict[str, Any] = {"samples": k, "failures": failures, "rewards": rewards, "passes": passes}
    if k == 0:  # every episode failed for infrastructure reasons: no estimate
        return {**out, "pass_rate": None, "stratum": None, "zero_variance": None}
    ci = bootstrap_mean([float(r >= cfg.pass_threshold) for r in rewards], seed=cfg.seed)
    return {**out, "pass_rate": round(passes / k, 4), "ci": [round(ci.low, 4), round(ci.high, 4)],
            "stratum": stratum(passes, k, cfg.too_easy_at), "zero_variance": len(set(rewards)) == 1}


async def check_policy(suite: Suite, task: Task, pool: Any, client: Any, tokenizer: Any, cfg: EnvQAConfig,
                       clock: Clock) -> dict[str, Any]:
    async def sample(i: int) -> Any:
        return await run_episode(client, tokenizer, suite, task, pool, cfg.agent, sample_seed(cfg.seed, task.id, i),
                                 episode_id=f"qa{i}")

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    results = await asyncio.gather(*(sample(i) for i in range(cfg.samples)))
    clock.work_s += loop.time() - t0
    ok = [r for r in results if r.failure is None]  # infrastructure failures are not zeros
    out = summarise([r.reward.value for r in ok], len(results) - len(ok), cfg)
    out["answers"] = [r.answer[-200:] for r in results[:3]]
    return out
