"""The trajectory record: what one episode produced, in tokens.

The agent loop produces it, the trainer (`rl`) and the orchestrator consume it; it is the
one module they share. Token ids are the whole conversation in order (prompt, model turns,
observations); `loss_mask` is 1 exactly on model-generated tokens; `logprobs` and
`versions` are the behaviour policy's logprob and policy version of each token (0.0 and -1
where the model did not generate the token). Nothing is ever re-tokenised.
"""

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

# Keys of `Trajectory.info` an episode copies from its reward's info (temper.envs.reward.episode_info): the
# task's category, the external tools it expected and those the agent ran, and the verifier's final screenshot
# (a base64 PNG, in the last context window's trajectory only; the dashboard shows it with the tool calls).
EPISODE_INFO = ("category", "tools_expected", "tools_used", "expected_tool_used")
SCREENSHOT = "screenshot_png"
SCREENSHOT_BYTES = 2 << 20  # the largest screenshot kept or returned (PNG bytes); a larger one is described only


class FailureKind(StrEnum):
    """Why an episode failed for reasons that are not the agent's fault (masked out of the loss)."""

    SANDBOX_CRASH = "sandbox_crash"
    HARNESS_TIMEOUT = "harness_timeout"
    WORKER_ERROR = "worker_error"
    ENGINE_ERROR = "engine_error"
    VERIFIER_ERROR = "verifier_error"  # the verifier itself broke (wrote no reward, crashed)
    AGENT_PROGRAM = "agent_program"  # an external agent program never reached the model (a crash after is a 0)
    TASK_BROKEN = "task_broken"  # the task's verifier fails on a clean control run too: quarantined, not retried


@dataclass
class Trajectory:
    token_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    versions: list[int]
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    task_id: str = ""
    group_id: str = ""
    id: str = ""
    failure: FailureKind | None = None
    truncated: bool = False  # the response hit its token budget before it finished
    timings: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.token_ids)
        if not (len(self.loss_mask) == len(self.logprobs) == len(self.versions) == n):
            raise ValueError(
                f"trajectory {self.id or '?'}: token_ids ({n}), loss_mask ({len(self.loss_mask)}), "
                f"logprobs ({len(self.logprobs)}) and versions ({len(self.versions)}) must have equal length"
            )
        if self.failure is not None and not isinstance(self.failure, FailureKind):
            self.failure = FailureKind(self.failure)

    @property
    def prompt_len(self) -> int:
        """Tokens before the first model-generated token."""
        for i, m in enumerate(self.loss_mask):
            if m:
                return i
        return len(self.loss_mask)

    @property
    def num_model_tokens(self) -> int:
        return sum(self.loss_mask)

    @property
    def trainable(self) -> bool:
        """Infrastructure failures carry no loss, and neither does an episode with no model tokens."""
        return self.failure is None and self.num_model_tokens > 0

    def min_version(self) -> int:
        """Oldest policy version among the model's tokens (-1 when there are none)."""
        model_versions = [v for v, m in zip(self.versions, self.loss_mask, strict=True) if m]
        return min(model_versions) if model_versions else -1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["failure"] = self.failure.value if self.failure else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Trajectory":
        return cls(**d)
