"""The main loop's checkpoints: each saved step's trainer state, then the store marks of the steps it covers
(they commit with the checkpoint that holds their weights: store.py).

In the background (`orchestrator.async_checkpoints`, one trainer process): the trainer's state is copied in
memory on the trainer's thread (a fraction of a second), then written, fsynced and committed on a thread of
its own while the next step trains. At most one write is in flight, so it costs one extra copy of weights and
optimizer state in memory, and a failed write surfaces at the next save. A crash before the commit leaves
the previous checkpoint as the one the store resumes from, as with a write in line.
"""

import asyncio
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temper.orchestrator.store import Store
from temper.rl.checkpoint import CheckpointSnapshot, write_snapshot

StepMarks = tuple[int, list[str], list[str], dict[str, Any]]  # step, fresh groups, replayed groups, metrics


class Checkpointer:
    def __init__(self, trainer: Any, store: Store, root: Path, tokenizer: Any, trainer_thread: Executor,
                 background: bool) -> None:
        self.trainer, self.store, self.root, self.tokenizer = trainer, store, root, tokenizer
        self.trainer_thread = trainer_thread  # the trainer's own thread: its state is read there, between steps
        self.background = background
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint") if background else None
        self._writing: asyncio.Future[float] | None = None

    async def save(self, marks: list[StepMarks], metrics: dict[str, Any]) -> dict[str, float]:
        """Checkpoint the trainer as it is now and commit `marks` with it. Returns the profile to log:
        `checkpoint_write_s`, the previous background write's own time, when this save waited for it."""
        loop = asyncio.get_running_loop()
        profile = {}
        if self._writing is not None:
            profile["checkpoint_write_s"] = await self._writing
            self._writing = None
        if self._writer is None:
            path = await loop.run_in_executor(self.trainer_thread, self.trainer.save_checkpoint, self.root, metrics,
                                              self.tokenizer)
            await asyncio.to_thread(self.store.commit_steps, marks, path.name)
            return profile
        snap = await loop.run_in_executor(self.trainer_thread, self.trainer.snapshot_checkpoint, metrics)
        # the marks' metrics rows as they are now: the loop goes on adding to its rows while the writer runs
        frozen = [(step, fresh, replayed, dict(row)) for step, fresh, replayed, row in marks]
        self._writing = loop.run_in_executor(self._writer, self._write, snap, frozen)
        return profile

    def _write(self, snap: CheckpointSnapshot, marks: list[StepMarks]) -> float:
        t = time.monotonic()
        path = write_snapshot(snap, self.root, self.tokenizer)
        self.store.commit_steps(marks, path.name)
        return time.monotonic() - t

    async def drain(self) -> float | None:
        """Wait for the write in flight (it raises here if it failed); returns its time, None if none."""
        if self._writing is None:
            return None
        writing, self._writing = self._writing, None
        return await writing

    async def close(self) -> None:
        """After the loop, or after an error in it: a write in flight still finishes (a complete checkpoint
        is worth keeping), then the writer thread stops."""
        if self._writing is not None:
            await asyncio.wait([self._writing])
            self._writing.exception()  # retrieved: the error that stopped the loop is the one to report
            self._writing = None
        if self._writer is not None:
            self._writer.shutdown(wait=True)
