"""A rollout worker: one engine, the agent loop and the suites' environments.

It runs single episodes (the pipeline asks for a group's n episodes, retries and quarantine
are the pipeline's job) and takes new weights. It talks to its engine only through the
generation protocol (`GenerationClient`), so a remote server could stand in. The same class
runs in process (local backend) and inside a Ray actor (backends/ray.py).
"""

import asyncio
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from temper.agent import AgentConfig, AgentLoop
from temper.envs import EpisodeLimits, Suite, Task
from temper.generation import Completion, GenerationClient, SamplingParams
from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.config import AgentSection, FaultConfig
from temper.orchestrator.faults import FaultInjector


class GatedClient:
    """A GenerationClient in front of the engine that can hold new requests while weights change.
    With partial rollouts off, an update waits for in-flight generations to finish first, so no
    sample spans two policy versions."""

    def __init__(self, inner: Any, partial_rollouts: bool):
        self.inner, self.partial = inner, partial_rollouts
        self.active = 0
        self.idle = asyncio.Event()
        self.idle.set()
        self.open = asyncio.Event()
        self.open.set()
        self.tokens = 0

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        await self.open.wait()
        self.active += 1
        self.idle.clear()
        try:
            c = await self.inner.generate(token_ids, params)
            self.tokens += len(c.token_ids)
            return c
        finally:
            self.active -= 1
            if self.active == 0:
                self.idle.set()

    async def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        if self.partial:
            await self.inner.load_weights(state, version)
            return
        self.open.clear()
        try:
            await self.idle.wait()
            await self.inner.load_weights(state, version)
        finally:
            self.open.set()


@dataclass
class WorkerSpec:
    """What a worker needs to build itself (picklable: a Ray actor gets it)."""

    agent: AgentSection
    faults: FaultConfig
    partial_rollouts: bool
    episode_timeout_s: float
    eval_temperature: float = 0.0
    eval_max_new_tokens: int | None = None
    salt: int = 0


class RolloutWorker:
    def __init__(self, client: GenerationClient, tokenizer: Any, suites: list[Suite], spec: WorkerSpec,
                 pool: Any = None):
        self.client = GatedClient(client, spec.partial_rollouts)
        self.suites, self.spec, self.pool = suites, spec, pool
        self.tasks: list[dict[str, Task]] = [{t.id: t for t in s.tasks()} for s in suites]
        a = spec.agent
        base = dict(system_prompt=a.system_prompt, top_p=a.top_p, max_answer_retries=a.max_answer_retries)
        self.train_loop = AgentLoop(self.client, tokenizer, AgentConfig(temperature=a.temperature, **base))
        self.eval_loop = AgentLoop(self.client, tokenizer, AgentConfig(temperature=spec.eval_temperature, **base))
        self.faults = FaultInjector(spec.faults, spec.salt)
        self.stats = {"episodes": 0, "sandbox_episodes": 0, "started": time.monotonic()}

    def limits(self, eval_mode: bool) -> EpisodeLimits:
        a = self.spec.agent
        turn = (self.spec.eval_max_new_tokens or a.max_new_tokens) if eval_mode else a.max_new_tokens
        return EpisodeLimits(max_turns=a.max_turns, max_tokens=a.max_context_tokens, max_turn_tokens=turn,
                             turn_timeout_s=self.spec.episode_timeout_s, episode_timeout_s=self.spec.episode_timeout_s)

    async def run_episode(self, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False) -> Attempt:
        """One episode. Infrastructure failures come back in `Attempt.failure` (or raise, for a
        crashed worker); the agent's own mistakes are just a low reward."""
        suite = self.suites[suite_index]
        task = self.tasks[suite_index][task_id]
        if not eval_mode:
            self.faults.maybe_crash_worker(f"episode {group_id}/{index}")
        env = suite.make_env(task, self.pool, self.limits(eval_mode))
        if not eval_mode:
            env = self.faults.wrap(env)
        loop = self.eval_loop if eval_mode else self.train_loop
        result = await asyncio.wait_for(loop.run(env, group_id=group_id, episode_id=str(index)),
                                        self.spec.episode_timeout_s + 30)
        self.stats["episodes"] += 1
        self.stats["sandbox_episodes"] += int(suite.needs_sandbox)
        trajs = result.trajectories
        for t in trajs:
            t.info["domain"] = task.domain
        return Attempt(trajs, 1, result.failure, str(result.reward.info.get("error", "")))

    async def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        await self.client.load_weights(state, version)

    def counters(self) -> dict[str, float]:
        return {"generated_tokens": float(self.client.tokens), "episodes": float(self.stats["episodes"]),
                "sandbox_episodes": float(self.stats["sandbox_episodes"]),
                **{f"injected_{k}": float(v) for k, v in self.faults.stats.items()}}


def sum_counters(per_worker: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Workers' counters added up key by key (every backend reports the sum over its workers)."""
    out: dict[str, float] = {}
    for counters in per_worker:
        for k, v in counters.items():
            out[k] = out.get(k, 0.0) + v
    return out


def build_worker(model_name: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec,
                 sandbox_run_dir: str | None = None) -> tuple[RolloutWorker, Any]:
    """Load the model, start an engine and (when a suite needs one) a sandbox pool: a ready worker
    and a close() for what it started. Used by both backends."""
    from temper.engine import AsyncEngine, LLMEngine
    from temper.envs import parse_spec
    from temper.models import load_model

    suites = [parse_spec(s) for s in suite_specs]
    loaded = load_model(model_name)
    engine = AsyncEngine(LLMEngine(loaded.model, loaded.tokenizer, engine_cfg))
    pool = None
    if any(s.needs_sandbox for s in suites):
        from temper.envs.sandboxes import make_pool
        from temper.sandbox import SandboxConfig

        extra = {"run_dir": sandbox_run_dir} if sandbox_run_dir else {}
        pool = make_pool(SandboxConfig(**extra), size=8)  # warm sandboxes: a cold start per episode is slow
    worker = RolloutWorker(engine, loaded.tokenizer, suites, spec, pool)

    def close() -> None:
        engine.close()
        if pool is not None:
            pool.close()

    return worker, close
