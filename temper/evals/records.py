"""Per-item records and their JSONL store: one line per (task id, sample index), appended as
items finish, so a run killed at any point resumes by skipping what is already on disk."""

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temper.envs.task import Task, content_hash

ITEMS_FILE = "items.jsonl"


def base_id(task: Task) -> str:
    """An id that survives prompt corruption (noisy:): clean and noisy variants of a task share it."""
    return content_hash(task.domain, task.payload, task.oracle)


@dataclass
class ItemRecord:
    suite: str  # the suite spec
    task_id: str
    sample: int
    domain: str
    reward: float = 0.0
    components: dict[str, float] = field(default_factory=dict)
    failure: str | None = None  # an infrastructure failure kind: counted apart, never as a wrong answer
    error: str | None = None
    prompt: str = ""
    output: str = ""
    tokens_in: int = 0  # prompt tokens summed over the episode's model calls (what an API bills)
    tokens_out: int = 0
    latency_s: float = 0.0  # the whole item, verifier included
    ttft_s: float | None = None  # time to the first generated token of the first turn
    tpot_s: float | None = None  # mean time per output token after the first
    peak_mem_mb: float | None = None
    cost: float = 0.0
    turns: int = 0
    base_id: str = ""
    tags: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.task_id, self.sample)

    @property
    def ok(self) -> bool:
        return self.failure is None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, default=str)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ItemRecord":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


class ItemStore:
    """Append-only JSONL of one suite's items. A torn last line (a kill mid-write) is ignored;
    a later record of the same key (a retried failure) replaces the earlier one."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / ITEMS_FILE

    def load(self) -> dict[tuple[str, int], ItemRecord]:
        out: dict[tuple[str, int], ItemRecord] = {}
        if not self.path.is_file():
            return out
        for line in self.path.read_text().splitlines():
            try:
                rec = ItemRecord.from_dict(json.loads(line))
            except (json.JSONDecodeError, TypeError):
                continue
            out[rec.key] = rec
        return out

    def append(self, records: list[ItemRecord]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            if f.tell() > 0 and not _ends_with_newline(self.path):
                f.write("\n")  # close a torn line left by a kill, so the next record parses
            f.write("".join(r.to_json() + "\n" for r in records))
            f.flush()
            os.fsync(f.fileno())


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def load_records(folder: Path) -> list[ItemRecord]:
    return list(ItemStore(folder).load().values())
