"""The token record of one context window: ids, loss mask, behaviour logprobs, policy versions.

Model tokens are appended exactly as the engine returned them (mask 1, their logprobs and
versions); prompt and observation tokens get mask 0, logprob 0.0 and version -1.
"""

from dataclasses import dataclass, field

from temper.generation.protocol import Completion
from temper.trajectory import Trajectory


@dataclass
class Transcript:
    token_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    prefix_len: int = 0  # tokens of the stable system prefix (shared across episodes: prefix cache)

    def __len__(self) -> int:
        return len(self.token_ids)

    def add_context(self, ids: list[int]) -> None:
        self.token_ids += ids
        self.loss_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [-1] * len(ids)

    def add_model(self, c: Completion) -> None:
        n = len(c.token_ids)
        versions = list(c.versions) if len(c.versions) == n else [c.version if c.version is not None else 0] * n
        logprobs = list(c.logprobs) if len(c.logprobs) == n else [0.0] * n
        self.token_ids += c.token_ids
        self.loss_mask += [1] * n
        self.logprobs += logprobs
        self.versions += versions

    def to_trajectory(self, **kw: object) -> Trajectory:
        return Trajectory(token_ids=list(self.token_ids), loss_mask=list(self.loss_mask),
                          logprobs=list(self.logprobs), versions=list(self.versions), **kw)  # type: ignore[arg-type]
