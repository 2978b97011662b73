"""Fault tolerance: retries with backoff, quarantine, and fault injection for drills and tests.

An infrastructure failure (sandbox died, harness timeout, worker crash) is retried with
exponential backoff up to `max_attempts`; then the task is quarantined (recorded in the store
and reported) and its failed episode is masked out of training, never scored as a reward of 0.
"""

import asyncio
import random
from collections import Counter
from collections.abc import Awaitable, Callable

from temper.envs import Environment, Observation, Reward
from temper.envs.env import StepResult
from temper.orchestrator.backends.protocol import Attempt, BackendExhausted
from temper.orchestrator.config import FaultConfig, RetryConfig
from temper.trajectory import FailureKind


class InjectedWorkerError(RuntimeError):
    """Raised on purpose inside a rollout worker (fault injection)."""


async def with_retries(run: Callable[[int], Awaitable[Attempt]], cfg: RetryConfig) -> Attempt:
    """Call `run(attempt)` until it returns no infrastructure failure or the attempts run out; the
    failed tries are listed on the result (the store counts them, and the retries, from there)."""
    delay = cfg.backoff_s
    result = Attempt([], 0, FailureKind.WORKER_ERROR, "never ran")
    failed: list[str] = []
    for attempt in range(1, cfg.max_attempts + 1):
        try:
            result = await run(attempt)
        except BackendExhausted:  # nowhere left to retry: the run stops
            raise
        except Exception as exc:  # a crashed worker call is an infrastructure failure, never the agent's
            result = Attempt([], attempt, FailureKind.WORKER_ERROR, f"{type(exc).__name__}: {exc}")
        result.attempts, result.failed_tries = attempt, failed
        if result.failure is None or result.failure == FailureKind.TASK_BROKEN:  # a broken task stays broken
            return result
        failed.append(result.failure.value)
        if attempt < cfg.max_attempts:
            await asyncio.sleep(delay)
            delay = min(delay * 2, cfg.backoff_max_s)
    return result


class FaultInjector:
    """Decides, per episode attempt, whether to kill its sandbox or crash the worker."""

    def __init__(self, cfg: FaultConfig, salt: int = 0):
        self.cfg = cfg
        self.rng = random.Random(cfg.seed * 1_000_003 + salt)
        self.stats: Counter = Counter()

    @property
    def active(self) -> bool:
        return self.cfg.sandbox_kill_rate > 0 or self.cfg.worker_error_rate > 0

    def maybe_crash_worker(self, where: str) -> None:
        if self.cfg.worker_error_rate and self.rng.random() < self.cfg.worker_error_rate:
            self.stats["worker_error"] += 1
            raise InjectedWorkerError(f"injected worker error in {where}")

    def wrap(self, env: Environment) -> Environment:
        if self.cfg.sandbox_kill_rate and self.rng.random() < self.cfg.sandbox_kill_rate:
            self.stats["sandbox_kill"] += 1
            return SandboxKillingEnv(env)
        return env


class SandboxKillingEnv(Environment):
    """Delegates to an environment, but kills its sandbox just before the verifier runs (the way
    an OOM kill or a host hiccup would), so the episode sees a real sandbox crash."""

    def __init__(self, inner: Environment) -> None:
        super().__init__(inner.task, inner.limits)
        self.inner = inner
        self.tools, self.background = inner.tools, inner.background

    async def reset(self) -> Observation:
        obs = await self.inner.reset()
        self.sandbox = self.inner.sandbox
        return obs

    async def step(self, action: str) -> StepResult:
        sb = self.inner.sandbox
        if sb is not None:
            await asyncio.to_thread(sb.close)  # its supervisor is gone: the next call raises SandboxCrashed
            return await self.inner.step(action)
        return StepResult(reward=_crash_reward(), done=True)  # no sandbox to kill: the harness fails alike

    def validate(self, answer: str) -> str | None:
        return self.inner.validate(answer)

    async def close(self) -> None:
        await self.inner.close()


def _crash_reward() -> Reward:
    return Reward.infra(FailureKind.SANDBOX_CRASH, "sandbox killed (fault injection)")
