"""What an episode produced: trajectories (one per context window), reward, and per-turn records."""

from dataclasses import dataclass, field
from typing import Any

from temper.envs.reward import Reward
from temper.envs.task import Task
from temper.trajectory import FailureKind, Trajectory


@dataclass
class ToolRecord:
    name: str
    arguments: dict[str, Any]
    output: str  # trimmed for the record
    error: bool
    duration_s: float


@dataclass
class TurnRecord:
    index: int
    window: int  # which context window (trajectory segment) the turn is in
    generate_s: float
    tools_s: float
    model_tokens: int
    observation_tokens: int
    finish_reason: str | None
    tool_calls: list[ToolRecord] = field(default_factory=list)


def tool_call_counts(turns: list[TurnRecord]) -> dict[str, int]:
    """An episode's tool calls and how many failed (malformed, unknown tool, bad arguments, or the
    tool's own error): the trajectories' info and the eval summary's `tool_calls` rates."""
    calls = [c for t in turns for c in t.tool_calls]
    return {"tool_calls": len(calls), "tool_errors": sum(c.error for c in calls)}


def turn_actions(turns: list[TurnRecord], window: int) -> list[dict[str, Any]]:
    """The tool calls of one context window's turns, as its trajectory's info keeps them (`temper dashboard`
    shows them with the episode): name, arguments, the output's head, whether it failed."""
    return [{"turn": t.index, "name": c.name, "arguments": c.arguments, "output": c.output[:500], "error": c.error,
             "duration_s": round(c.duration_s, 4)} for t in turns if t.window == window for c in t.tool_calls]


class InfraFailure(Exception):
    """The harness failed (sandbox crash, engine error, timeout): the episode carries no reward."""

    def __init__(self, kind: FailureKind, message: str):
        super().__init__(message)
        self.kind = kind


@dataclass
class EpisodeResult:
    task: Task
    trajectories: list[Trajectory]
    reward: Reward
    turns: list[TurnRecord]
    messages: list[dict[str, Any]]  # the last context window's conversation, as rendered
    answer: str = ""

    @property
    def failure(self) -> FailureKind | None:
        return self.reward.failure

    @property
    def trajectory(self) -> Trajectory:
        """The episode's trajectory when it fit one context window (the usual case)."""
        if len(self.trajectories) != 1:
            raise ValueError(f"episode of {self.task.id} spans {len(self.trajectories)} context windows; "
                             "use .trajectories")
        return self.trajectories[0]
