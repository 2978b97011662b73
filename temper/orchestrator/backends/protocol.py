"""What a backend is to the pipeline: where episodes run and where new weights go, and the
result of one episode after its tries (`Attempt`). The local backend (workers in this process)
is the default; `ray` (actors) and `remote` (an OpenAI-compatible server) implement the same."""

from dataclasses import dataclass, field
from typing import Any, Protocol

from temper.errors import TemperError
from temper.trajectory import FailureKind


class BackendExhausted(TemperError):
    """No worker or server is left to run episodes on: the run stops (never retried, never a task's fault)."""


@dataclass
class Attempt:
    """An episode's outcome after retries: its trajectories (failure set if all tries failed)."""

    trajectories: list[Any]
    attempts: int
    failure: FailureKind | None = None
    message: str = ""
    failed_tries: list[str] = field(default_factory=list)  # failure kind of each failed try, in order


class Backend(Protocol):
    """Where episodes run (this process, Ray actors, a server); the pipeline needs only this."""

    num_workers: int

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt: ...

    async def push_weights(self, state: dict, version: int) -> None: ...

    def counters(self) -> dict[str, float]: ...  # summed over workers (tokens, episodes)

    def gauges(self) -> dict[str, float]: ...  # the latest values (weight update latency, servers up)

    def close(self) -> None: ...
