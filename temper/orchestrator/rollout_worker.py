"""A rollout worker: one policy (temper.episode_runner: engine or server, tokenizer, sandbox pool), the
suites' tasks, and `run_episode` for each episode it is asked for.

It runs single episodes (the pipeline asks for a group's n episodes, retries and quarantine
are the pipeline's job) and takes new weights. It talks to its engine only through the
generation protocol (`GenerationClient`), so a remote server could stand in. The same class
runs in process (local backend) and inside a Ray actor (backends/ray.py).
"""

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from temper.agent import AgentConfig
from temper.envs import Suite, Task, parse_spec
from temper.episode_runner import EpisodeRunner, open_runner, run_episode
from temper.generation import Completion, SamplingParams
from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.config import FaultConfig
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
        await self.while_held(lambda: self.inner.load_weights(state, version))

    async def while_held(self, update: Callable[[], Awaitable[None]]) -> None:
        """Run `update()` (a weight change); without partial rollouts, new requests wait and
        in-flight ones finish first."""
        if self.partial:
            await update()
            return
        self.open.clear()
        try:
            await self.idle.wait()
            await update()
        finally:
            self.open.set()


@dataclass
class WorkerSpec:
    """What a worker runs its episodes with (picklable: a Ray actor gets it)."""

    agent: AgentConfig  # training episodes
    eval_agent: AgentConfig  # evaluation episodes (greedy, by default)
    faults: FaultConfig
    partial_rollouts: bool
    salt: int = 0

    @classmethod
    def of(cls, cfg: Any, salt: int = 0) -> "WorkerSpec":
        """A TrainConfig's: its eval section's temperature and turn tokens apply to eval episodes."""
        a, e = cfg.agent, cfg.eval
        eval_agent = a.model_copy(update={"temperature": e.temperature,
                                          "max_turn_tokens": e.max_turn_tokens or a.max_turn_tokens})
        return cls(a, eval_agent, cfg.orchestrator.faults, cfg.orchestrator.partial_rollouts, salt)

    def salted(self, salt: int) -> "WorkerSpec":
        return WorkerSpec(**{**self.__dict__, "salt": salt})


class RolloutWorker:
    def __init__(self, policy: EpisodeRunner, suites: list[Suite], spec: WorkerSpec):
        self.policy, self.client = policy, GatedClient(policy.client, spec.partial_rollouts)
        self.tokenizer, self.sandboxes = policy.tokenizer, policy.sandboxes
        self.suites, self.spec = suites, spec
        self.tasks: list[dict[str, Task]] = [{t.id: t for t in s.tasks()} for s in suites]
        self.faults = FaultInjector(spec.faults, spec.salt)
        self.stats = {"episodes": 0, "sandbox_episodes": 0}

    @classmethod
    def start(cls, model: str, engine_cfg: Any, suite_specs: list[str], spec: WorkerSpec,
              sandbox: Any = None, device: str = "auto") -> "RolloutWorker":
        """A worker on a policy of its own (local and Ray backends): `model` on an in-process engine on
        `device` (runtime.device), with a sandbox pool on `sandbox` (a SandboxConfig) when a suite needs
        one. Close `worker.policy`."""
        suites = [parse_spec(s) for s in suite_specs]
        policy = open_runner(model, engine_cfg, needs_sandbox=any(s.needs_sandbox for s in suites), sandbox=sandbox,
                             device=device)
        return cls(policy, suites, spec)

    async def run_episode(self, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        """One episode, sampled with `seed` (None: the engine's next). Infrastructure failures come back
        in `Attempt.failure` (or raise, for a crashed worker); the agent's own mistakes are just a low reward."""
        suite = self.suites[suite_index]
        task = self.tasks[suite_index][task_id]
        if not eval_mode:
            self.faults.maybe_crash_worker(f"episode {group_id}/{index}")
        agent = self.spec.eval_agent if eval_mode else self.spec.agent
        episode = run_episode(self.client, self.tokenizer, suite, task, self.sandboxes, agent, seed, group_id=group_id,
                              episode_id=str(index), wrap_env=None if eval_mode else self.faults.wrap)
        result = await asyncio.wait_for(episode, agent.episode_timeout_s + agent.tool_grace_s)
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

