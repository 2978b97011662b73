"""How long a task's verifier takes on a clean run, kept per task folder (by its content digest).

A verifier that runs past its timeout after the agent phase is the agent's 0 only when the task is known
to verify well inside that time without the agent's work: env QA's oracle runs, `temper eval --oracle` and
control runs record the time here (docs/envs.md, "The reward channel"). A control run that itself timed out
is recorded too, so the next episode of a broken task does not pay for another. One small JSON file per
digest, replaced atomically: rollout workers in other processes read what one of them measured.
"""

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

WELL_INSIDE = 0.5  # a clean run within this share of the timeout: the agent's work made it run past


@dataclass(frozen=True)
class CleanVerify:
    seconds: float | None  # None: the clean run itself ran past `limit_s`
    limit_s: float
    source: str  # "oracle" (env QA, eval --oracle) or "control" (a fresh sandbox after an agent's timeout)

    @property
    def fits(self) -> bool:
        return self.seconds is not None and self.seconds <= WELL_INSIDE * self.limit_s


def _root() -> Path:
    return Path(tempfile.gettempdir()) / "temper-verify-times"


def recorded(digest: str, limit_s: float) -> CleanVerify | None:
    """What a clean run of this task measured under the same timeout; None if none did (or the file is bad)."""
    try:
        data = json.loads((_root() / f"{digest}.json").read_text())
        rec = CleanVerify(data["seconds"], float(data["limit_s"]), str(data["source"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return rec if rec.limit_s == limit_s else None


def record(digest: str, rec: CleanVerify) -> None:
    root = _root()
    root.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=root, prefix=f".{digest}.", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump({"seconds": rec.seconds, "limit_s": rec.limit_s, "source": rec.source}, f)
    os.replace(tmp, root / f"{digest}.json")
