"""KV blocks: allocation, reference counts and the prefix cache.

A full block is identified by a chained hash of its tokens and of every token before it,
so equal hashes mean equal prefixes; a hit is still verified against the stored tokens.
Blocks whose last user left stay cached (and shareable) until evicted, least recently
used first. A block is published in the cache only once its KV has been computed; a
request whose next prefix block is being computed by another sequence waits a step
instead of computing it twice (this is how `n` samples share their prompt).

With a sliding window and attention sinks, a block no query from now on can see is released
(`release_outside_window`): its entry in the sequence's table becomes FREED, so that a table stays
indexed by position while the blocks in use stay bounded by the window, however long the sequence.
"""

from collections import OrderedDict

from temper.engine.sequence import Sequence

FREED = -1  # a table entry whose block was released (outside the window, before the sinks' end)


def block_hash(prev: int | None, tokens: tuple[int, ...]) -> int:
    return hash((prev, tokens))


class BlockManager:
    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool):
        self.num_blocks, self.block_size, self.prefix_caching = num_blocks, block_size, prefix_caching
        self.ref = [0] * num_blocks
        self.hash: list[int | None] = [None] * num_blocks
        self.tokens: list[tuple[int, ...] | None] = [None] * num_blocks
        self.free_ids = list(range(num_blocks - 1, -1, -1))  # pop() hands out low ids first
        self.evictable: OrderedDict[int, None] = OrderedDict()  # cached, unused; LRU first
        self.cached: dict[int, int] = {}  # hash -> block id
        self.pending: dict[int, int] = {}  # hash -> seq id computing it right now
        self.hit_tokens = 0
        self.queried_tokens = 0
        self.evictions = 0
        self.epoch = 0  # bumped by invalidate(); KV from an older epoch is never published
        # bumped each time a block is handed out: (id, generation) names one block's contents for its life
        self.generation = [0] * num_blocks

    @property
    def num_free(self) -> int:
        return len(self.free_ids) + len(self.evictable)

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _take(self) -> int:
        if self.free_ids:
            block = self.free_ids.pop()
        else:
            block, _ = self.evictable.popitem(last=False)
            del self.cached[self.hash[block]]
            self.hash[block], self.tokens[block] = None, None
            self.evictions += 1
        self.ref[block] = 1
        self.generation[block] += 1
        return block

    def admit(self, seq: Sequence) -> bool:
        """Attach cached prefix blocks to a sequence with no KV. False: wait, a prefix block is being computed."""
        bs = self.block_size
        seq.num_computed = 0
        seq.kv_epoch = self.epoch
        if not self.prefix_caching or seq.params.prompt_logprobs:
            return True
        # At least one token must stay pending: its logits give the next token.
        full = (len(seq) - 1) // bs
        prev, hits = None, []
        for i in range(full):
            toks = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = block_hash(prev, toks)
            block = self.cached.get(h)
            if block is None or self.tokens[block] != toks:
                if h in self.pending and self.pending[h] != seq.seq_id:
                    return False
                break
            hits.append((block, h))
            prev = h
        for block, h in hits:
            if self.ref[block] == 0:
                self.evictable.pop(block)
            self.ref[block] += 1
            seq.block_table.append(block)
            seq.block_hashes.append(h)
        seq.num_computed = len(hits) * bs
        self.queried_tokens += len(seq)
        self.hit_tokens += seq.num_computed
        # Claim the prompt blocks this sequence will compute, so identical prompts wait for them.
        for i in range(len(hits), full):
            prev = block_hash(prev, tuple(seq.token_ids[i * bs:(i + 1) * bs]))
            self.pending.setdefault(prev, seq.seq_id)
        return True

    def ensure(self, seq: Sequence, num_tokens: int) -> bool:
        """Give `seq` blocks for its first `num_tokens` tokens; all or nothing."""
        need = self.blocks_for(num_tokens) - len(seq.block_table)
        if need <= 0:
            return True
        if need > self.num_free:
            return False
        seq.block_table.extend(self._take() for _ in range(need))
        return True

    def fork(self, parent: Sequence, child: Sequence) -> int | None:
        """Give `child` (no KV yet) the parent's computed tokens: full blocks shared (reference
        counted), the partly filled last block, which the parent keeps writing to, in a block of
        its own. Returns that block (the caller copies the KV into it), or None if all were full.
        The caller checks that a free block exists."""
        full = parent.num_computed // self.block_size
        for block in parent.block_table[:full]:
            if block != FREED:
                self.ref[block] += 1
        child.block_table = parent.block_table[:full]
        child.block_hashes = list(parent.block_hashes[:full])
        child.num_computed, child.kv_epoch = parent.num_computed, parent.kv_epoch
        self.queried_tokens += len(child)
        self.hit_tokens += child.num_computed
        if full == self.blocks_for(parent.num_computed):
            return None
        child.block_table.append(self._take())
        return child.block_table[-1]

    def publish(self, seq: Sequence) -> None:
        """Put the sequence's newly completed blocks in the prefix cache (call after a step)."""
        if not self.prefix_caching or seq.kv_epoch != self.epoch:
            return
        bs = self.block_size
        for i in range(len(seq.block_hashes), seq.num_computed // bs):
            prev = seq.block_hashes[-1] if seq.block_hashes else None
            toks = tuple(seq.token_ids[i * bs:(i + 1) * bs])
            h = block_hash(prev, toks)
            seq.block_hashes.append(h)
            if self.pending.get(h) == seq.seq_id:
                del self.pending[h]
            block = seq.block_table[i]
            if block == FREED:  # released before it was published (it left the window): the chain stops
                break
            if h not in self.cached and self.hash[block] is None:
                self.cached[h], self.hash[block], self.tokens[block] = block, h, toks

    def free(self, seq: Sequence) -> None:
        for block in reversed(seq.block_table):
            if block != FREED:
                self._release(block)
        seq.block_table, seq.block_hashes, seq.num_computed = [], [], 0
        for h in [h for h, sid in self.pending.items() if sid == seq.seq_id]:
            del self.pending[h]

    def trim(self, seq: Sequence, num_tokens: int) -> None:
        """Drop blocks past `num_tokens` (after rejected speculative tokens)."""
        keep = self.blocks_for(num_tokens)
        while len(seq.block_table) > max(keep, len(seq.block_hashes)):
            self._release(seq.block_table.pop())

    def release_outside_window(self, seq: Sequence, window: int, sinks: int) -> int:
        """Release the blocks of `seq` that no query from its next position on can see (every key at most
        next - window, none of them among the first `sinks` positions); returns how many. A block in the prefix
        cache stays cached, unreferenced (evictable), for another sequence with that prefix."""
        bs, released = self.block_size, 0
        first = -(-sinks // bs)  # blocks holding a sink are kept
        last = (seq.num_computed - window + 1) // bs  # blocks before this one end at or before next - window
        for i in range(first, min(last, len(seq.block_table))):
            if seq.block_table[i] != FREED:
                self._release(seq.block_table[i])
                seq.block_table[i] = FREED
                released += 1
        return released

    def blocks_in_use(self, seq: Sequence) -> int:
        return sum(b != FREED for b in seq.block_table)

    def _release(self, block: int) -> None:
        self.ref[block] -= 1
        if self.ref[block] == 0:
            if self.hash[block] is not None:
                self.evictable[block] = None
            else:
                self.free_ids.append(block)

    def invalidate(self) -> None:
        """Forget every cached prefix (new weights make the stored KV stale)."""
        for block in self.evictable:
            self.free_ids.append(block)
        self.evictable.clear()
        self.cached.clear()
        self.pending.clear()
        self.hash = [None] * self.num_blocks
        self.tokens = [None] * self.num_blocks
        self.epoch += 1
