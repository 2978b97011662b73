"""The environment interface: async reset/step, the task's own limits, a verifier, oracle/no-op runs.

An environment is the world of one episode: the task, a sandbox when the task executes
anything, and the verifier that scores the outcome. The agent's *tools* (bash, python, files)
act on `env.sandbox`; `step(action)` receives the agent's answer (or, for multi-turn
environments, its move) and returns the next observation, a reward when the episode ends,
and `done`.
"""

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from temper.envs.reward import UNIT, Reward, RewardValueError, in_range
from temper.envs.sandboxes import crash_reward, is_sandbox_crash
from temper.envs.task import Task
from temper.trajectory import FailureKind

GRACE_S = 30.0  # margin of an outer timeout over the inner one it guards (a tool call, a verifier)


@dataclass(frozen=True)
class TaskLimits:
    """Time limits a task sets for itself (a task folder's task.toml); the agent's turn and token
    budgets are the agent's (temper.agent.AgentConfig), merged with these by `AgentConfig.for_task`."""

    agent_timeout_s: float | None = None  # None: the agent's own episode timeout
    verifier_timeout_s: float = 120.0


@dataclass
class Observation:
    content: str
    role: str = "user"


@dataclass
class StepResult:
    observation: Observation | None = None
    reward: Reward | None = None
    done: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class Environment(ABC):
    """Base of all environments. Subclasses set `tools` (names of built-in tools the agent may
    use here) and `background` (stable, task-independent instructions: a shared prompt prefix)."""

    tools: tuple[str, ...] = ()
    background: str = ""
    # The range the suite's rewards lie in; a value outside it is the agent's 0 (`in_range`). None: any
    # finite value (a user's reward function that declares none).
    reward_range: tuple[float, float] | None = UNIT

    def __init__(self, task: Task, limits: TaskLimits | None = None) -> None:
        self.task = task
        self.limits = limits or TaskLimits()
        self.sandbox: Any = None  # a temper.sandbox.Sandbox while the episode runs, when needed

    async def reset(self) -> Observation:
        return Observation(self.task.prompt)

    @abstractmethod
    async def step(self, action: str) -> StepResult: ...

    def validate(self, answer: str) -> str | None:
        """A hint when a final answer is not in the expected form (the agent may retry), else None."""
        return None

    async def run_oracle(self) -> Reward:
        """Apply the task's reference solution and score it with the same verifier."""
        if self.task.oracle is None:
            raise NotImplementedError(f"task {self.task.id} of {self.task.suite} has no oracle")
        return (await self.step(self.task.oracle)).reward or Reward()

    async def run_noop(self) -> Reward:
        """Score an agent that does nothing (env QA: a no-op must fail)."""
        return (await self.step("")).reward or Reward()

    async def close(self) -> None:
        return None

    async def __aenter__(self) -> "Environment":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class SingleTurnEnv(Environment):
    """prompt -> completion -> reward. Subclasses implement `verify`."""

    @abstractmethod
    async def verify(self, answer: str) -> Reward: ...

    async def step(self, action: str) -> StepResult:
        reward = await timed_verify(self.verify(action), self.limits.verifier_timeout_s, self.reward_range)
        return StepResult(reward=reward, done=True)


async def timed_verify(coro: Any, timeout_s: float, reward_range: tuple[float, float] | None = UNIT) -> Reward:
    """Run a verifier; its own timeout is an infrastructure failure, and so is a crashed sandbox
    unless what the agent left in it broke it (then a 0: `crash_reward`). A value that is not a
    finite number, or lies outside `reward_range`, is the agent's 0 with a flag (never masked)."""
    try:
        return in_range(await asyncio.wait_for(coro, timeout_s), reward_range)
    except RewardValueError as exc:
        return Reward(value=0.0, info={"error": str(exc), "reward_not_finite": True})
    except TimeoutError:
        return Reward.infra(FailureKind.HARNESS_TIMEOUT, f"verifier timed out after {timeout_s:g}s")
    except Exception as exc:
        if is_sandbox_crash(exc):
            return crash_reward(exc, "in the verifier")
        raise
