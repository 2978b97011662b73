"""Which sequences run this step, and how many tokens each.

Every step: decoding sequences first (one token each, plus speculative drafts), then
chunks of prompts being prefilled, then newly admitted requests, all within a per-step
token budget. When the KV cache runs out, the most recently admitted sequence is
preempted: its blocks are freed and it is recomputed later (from the prefix cache when
its blocks are still there). A sequence keeps its own sampling generator, so a preempted
run produces the same tokens as an unpressured one.
"""

from collections import deque
from dataclasses import dataclass, field

from temper.engine.block_manager import BlockManager
from temper.engine.config import EngineConfig
from temper.engine.sequence import Sequence, Status


@dataclass
class ScheduledSeq:
    """A sequence in this step's batch: the tokens it feeds (its pending ones, then its drafts)."""

    seq: Sequence
    num_tokens: int  # tokens fed this step, drafts included
    drafts: list[int] = field(default_factory=list)

    @property
    def completes(self) -> bool:
        """True when this step computes the sequence's last pending token (so it samples)."""
        return self.seq.num_computed + self.num_tokens == len(self.seq) + len(self.drafts)

    @property
    def all_logits(self) -> bool:
        """Logits for every fed token: the request scores its prompt."""
        return self.seq.params.prompt_logprobs and len(self.seq.prompt_logprobs) < self.seq.num_prompt_tokens


class Scheduler:
    def __init__(self, config: EngineConfig, blocks: BlockManager):
        self.config, self.blocks = config, blocks
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.num_preemptions = 0
        self.num_prefill_chunks = 0
        self.out_of_room: list[Sequence] = []  # sequences alone in the cache that still do not fit

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    def remove(self, seq: Sequence) -> None:
        self.blocks.free(seq)
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)

    def start_forked(self, seq: Sequence) -> None:
        """A waiting sequence that received its KV by a fork (see BlockManager.fork) starts decoding."""
        self.waiting.remove(seq)
        seq.status = Status.RUNNING
        seq.num_cached_prompt_tokens = max(seq.num_cached_prompt_tokens, seq.num_computed)
        self.running.append(seq)

    def preempt(self, seq: Sequence) -> None:
        self.blocks.free(seq)
        self.running.remove(seq)
        seq.status = Status.WAITING
        self.waiting.appendleft(seq)
        self.num_preemptions += 1

    def _room(self, seq: Sequence, num_tokens: int, scheduled: set[int]) -> bool:
        """Blocks for `num_tokens` of `seq`, preempting later unscheduled sequences if needed."""
        while not self.blocks.ensure(seq, num_tokens):
            victims = [s for s in self.running if s is not seq and s.seq_id not in scheduled]
            if not victims:
                return False
            self.preempt(max(victims, key=lambda s: s.arrival))
        return True

    def schedule(self, drafts: dict[int, list[int]]) -> list[ScheduledSeq]:
        budget = self.config.max_num_batched_tokens
        out: list[ScheduledSeq] = []
        ids: set[int] = set()
        for seq in [s for s in self.running if s.num_pending == 1]:
            if seq.status is not Status.RUNNING or budget <= 0:
                continue
            d = drafts.get(seq.seq_id, [])[: max(budget - 1, 0)]
            if not self._room(seq, len(seq) + len(d), ids):
                d = []
                if not self._room(seq, len(seq), ids):
                    # Others (already scheduled) hold the blocks: wait; alone: it can never fit.
                    self._stuck(seq) if len(self.running) == 1 else self.preempt(seq)
                    continue
            out.append(ScheduledSeq(seq, 1 + len(d), d))
            ids.add(seq.seq_id)
            budget -= 1 + len(d)
        for seq in [s for s in self.running if s.num_pending > 1]:
            if seq.status is not Status.RUNNING or budget <= 0:
                continue
            n = self._chunk(seq, budget, first=not out)
            older = {s.seq_id for s in self.running if s.arrival < seq.arrival}  # only newer ones are preempted
            if n and self._room(seq, seq.num_computed + n, ids | older):
                out.append(ScheduledSeq(seq, n))
                ids.add(seq.seq_id)
                budget -= n
            elif not out and not self._room(seq, seq.num_computed + n, ids):
                self._stuck(seq) if len(self.running) == 1 else self.preempt(seq)
        while self.waiting and budget > 0 and len(self.running) < self.config.max_num_seqs:
            seq = next((s for s in self.waiting if self.blocks.admit(s)), None)
            if seq is None:
                break  # every waiting request waits for a prefix block being computed
            n = self._chunk(seq, budget, first=not out)
            if not n or not self.blocks.ensure(seq, seq.num_computed + n):
                self.blocks.free(seq)
                if not out and not self.running:
                    self.waiting.remove(seq)
                    self._stuck(seq)
                    continue
                break
            self.waiting.remove(seq)
            seq.status = Status.RUNNING
            seq.num_cached_prompt_tokens = max(seq.num_cached_prompt_tokens, seq.num_computed)
            self.running.append(seq)
            out.append(ScheduledSeq(seq, n))
            ids.add(seq.seq_id)
            budget -= n
        self.num_prefill_chunks += sum(1 for s in out if s.seq.num_pending > 1)
        return out

    def _chunk(self, seq: Sequence, budget: int, first: bool) -> int:
        if self.config.chunked_prefill:
            return min(seq.num_pending, budget)
        # Unchunked: the whole remainder in one step; it may exceed the budget only when alone.
        return seq.num_pending if (seq.num_pending <= budget or first) else 0

    def _stuck(self, seq: Sequence) -> None:
        """The cache cannot hold this sequence even alone: it ends (the engine reports why)."""
        if seq in self.running:
            self.running.remove(seq)
        self.blocks.free(seq)
        seq.status = Status.FINISHED
        self.out_of_room.append(seq)
