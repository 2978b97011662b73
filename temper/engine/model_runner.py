"""Run one engine step through the shared model: pack tokens, build attention metadata, get logits.

Everything the attention needs per step (block ids, write slots, decode masks) is built
once here and reused by every layer. Logits are computed only for rows that sample (the
last token of a finished prefill, decode rows, speculative verification rows), never for
a whole prompt. Every tensor built here is built on the KV cache's device (the model's): the
step's metadata goes to the device once, and no layer copies anything between host and device.
"""

import torch

from temper import native
from temper.engine.block_manager import FREED
from temper.engine.config import EngineConfig
from temper.engine.decode_buffer import DecodeBuffer
from temper.engine.kv_cache import KVCache
from temper.engine.paged_attention import Cascade, PagedAttention, Segment, StepMeta
from temper.engine.scheduler import ScheduledSeq
from temper.models import LlamaForCausalLM


class ModelRunner:
    def __init__(self, model: LlamaForCausalLM, cache: KVCache, config: EngineConfig,
                 block_generation: list[int] | None = None):
        """`block_generation`: the block manager's (see BlockManager.generation); without it the
        cascade's shared prefixes are gathered again every step."""
        self.model, self.cache, self.config = model, cache, config
        self.block_generation = block_generation
        self.block_size = cache.block_size
        self.device = cache.device
        # Off the CPU, decode rows attend through torch SDPA (fused kernels); the CPU keeps its measured
        # matmul path (see paged_attention.py). Tests flip it to check both give the same tokens.
        self.sdpa_decode = self.device.type != "cpu"
        # On the CPU with an fp32 cache, decode rows attend through the C++ kernel (temper/native).
        self.native = native.use(config.native_kernels, self.device) and cache.k.dtype == torch.float32 and \
            model.config.head_dim in native.HEAD_DIMS
        self.native_rows = 0  # decode rows the kernel attended (tests: it really ran)
        self.native_segment_tokens = 0  # segment tokens (draft verification) it attended
        # The engine's sliding window (with attention sinks) or the model's own (Mistral), if any.
        self.window = config.sliding_window or (model.config.sliding_window or 0)
        self.sinks = config.sink_tokens if config.sliding_window else 0
        self.cascade_rows = 0  # decode rows that attended to a shared prefix once for their group
        # Never more than the KV cache itself: at most doubles KV memory (an int8 cache stays small).
        self.buffer = DecodeBuffer(model.config, min(config.decode_buffer_bytes, cache.nbytes), config.max_num_seqs,
                                   self.device, refill_full_blocks=cache.open is not None)
        self.max_model_len = config.max_model_len or model.config.max_position_embeddings

    @torch.inference_mode()
    def run(self, batch: list[ScheduledSeq]) -> tuple[torch.Tensor, list[tuple[int, int]]]:
        """Returns logits [R, V] and, per scheduled entry (in `batch` order), its (first row, count) in them:
        the last rows of an entry that completes its pending tokens sample; rows before them score the prompt."""
        bs, dev = self.block_size, self.device
        meta = StepMeta(write_blocks=torch.empty(0, device=dev), write_offsets=torch.empty(0, device=dev))
        decodes = [i for i in range(len(batch)) if batch[i].num_tokens == 1]
        if decodes:  # decodes first, in the order their attention metadata wants
            decodes = [decodes[j] for j in self._decode_meta(meta, [batch[i] for i in decodes])]
        order = decodes + [i for i in range(len(batch)) if batch[i].num_tokens != 1]
        ids: list[int] = []
        positions: list[int] = []
        write_blocks: list[int] = []
        logit_rows: list[int] = []
        spans: list[tuple[int, int]] = [(0, 0)] * len(batch)
        for i in order:
            item = batch[i]
            seq, start, n = item.seq, item.seq.num_computed, item.num_tokens
            row = len(ids)
            ids.extend((seq.token_ids + item.drafts)[start:start + n])
            positions.extend(range(start, start + n))
            table = seq.block_table
            write_blocks.extend(table[p // bs] for p in range(start, start + n))
            if n > 1:
                meta.segments.append(self._segment(row, start, n, table[:(start + n + bs - 1) // bs]))
            k = n if item.all_logits else (1 + len(item.drafts)) if item.completes else 0
            spans[i] = (len(logit_rows), k)
            logit_rows.extend(range(row + n - k, row + n))
        pos = torch.tensor(positions, dtype=torch.long, device=dev)
        meta.write_blocks = torch.tensor(write_blocks, dtype=torch.long, device=dev)
        self.cache.plan_writes(write_blocks, positions)
        meta.write_offsets = pos % bs
        attention = PagedAttention(self.cache, meta, self.config.attention_chunk, self.window, self.sinks,
                                   self.sdpa_decode, self.native)
        try:
            ids_t = torch.tensor(ids, dtype=torch.long, device=dev)
            hidden = self.model(ids_t[None], pos[None], attention=attention)[0]
        except BaseException:
            self.buffer.reset()  # its rows may hold this step's half-written tokens
            raise
        if attention.native:
            self.native_rows += meta.num_decode
        self.native_segment_tokens += sum(s.length for s in meta.segments if attention.native_segment(s))
        if not logit_rows:
            return hidden.new_empty(0, self.model.config.vocab_size), spans
        return self._logits(hidden[logit_rows]), spans

    def _segment(self, row: int, start: int, n: int, table: list[int]) -> Segment:
        """A prefill chunk or verification; with a sliding window, over the blocks it still holds."""
        dev = self.device
        if FREED not in table:
            return Segment(row, start, n, torch.tensor(table, device=dev))
        held = [(j, b) for j, b in enumerate(table) if b != FREED]
        return Segment(row, start, n, torch.tensor([b for _, b in held], device=dev),
                       torch.tensor([j * self.block_size + o for j, _ in held for o in range(self.block_size)],
                                    device=dev))

    def _window_decode_meta(self, meta: StepMeta, tables: list[list[int]], lens: list[int]) -> None:
        """Decode rows under a sliding window: each gathers only the blocks it still holds (its sinks' and its
        window's: released ones are FREED), so a step reads at most those keys however long the sequence."""
        bs, dev = self.block_size, self.device
        held = [[(j, b) for j, b in enumerate(t) if b != FREED] for t in tables]
        m = max(len(h) for h in held)
        blocks = torch.tensor([[b for _, b in h] + [0] * (m - len(h)) for h in held], dtype=torch.long, device=dev)
        kpos = torch.tensor([[j * bs + o for j, _ in h for o in range(bs)] + [-1] * ((m - len(h)) * bs)
                             for h in held], device=dev)
        qpos = torch.tensor(lens, device=dev)[:, None] - 1
        allowed = (kpos >= 0) & (kpos <= qpos) & ((kpos > qpos - self.window) | (kpos < self.sinks))
        meta.decode_blocks = blocks.flatten()
        meta.decode_mask = additive(allowed).view(1, len(tables), 1, m * bs)
        meta.decode_max_blocks = m

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The head's logits for these rows. Below 16 rows they are padded to a multiple of 4: on this
        CPU's SGEMM a vocabulary-sized head over 3, 7 or 11 rows runs at row-by-row speed (SmolLM2, 2
        threads: 37 ms for 3 rows, 17 ms for 4), and speculative verification has such counts."""
        n = hidden.shape[0]
        pad = -n % 4 if 1 < n < 16 else 0
        if pad:
            hidden = torch.cat([hidden, hidden.new_zeros(pad, hidden.shape[1])])
        return self.model.compute_logits(hidden)[:n].float()

    def _decode_meta(self, meta: StepMeta, items: list[ScheduledSeq]) -> list[int]:
        """Attention metadata for the decode rows; returns their order in the batch (the decode
        buffer's slot order when it holds them)."""
        bs, dev = self.block_size, self.device
        lens = [it.seq.num_computed + 1 for it in items]
        tables = [it.seq.block_table[:(n + bs - 1) // bs] for it, n in zip(items, lens, strict=True)]
        skip = [0] * len(items)  # leading blocks each row attends to through its group's shared prefix
        groups = shared_prefixes(tables) if self.config.cascade_attention and not self.window else []
        for rows, shared in groups:
            for i in rows:
                skip[i] = len(shared)
        own = [t[k:] for t, k in zip(tables, skip, strict=True)]
        own_lens = [n - k * bs for n, k in zip(lens, skip, strict=True)]
        order = list(range(len(items)))
        if self.config.decode_buffer_bytes and not self.window:
            reach = [min(it.seq.num_prompt_tokens + it.seq.params.max_tokens, self.max_model_len) - k * bs
                     for it, k in zip(items, skip, strict=True)]
            planned = self.buffer.plan([it.seq.seq_id for it in items], skip, own_lens, reach, own, bs)
            if planned is not None:
                slots, meta.buffer = planned
                order.sort(key=slots.__getitem__)
        meta.num_decode = len(items)
        if groups:
            new_row = {old: new for new, old in enumerate(order)}
            meta.cascade = self._cascade_meta([([new_row[r] for r in rows], shared) for rows, shared in groups],
                                              len(items))
            self.cascade_rows += sum(len(rows) for rows, _ in groups)
        own, own_lens = [own[i] for i in order], [own_lens[i] for i in order]
        if self.window:  # no shared prefixes, no decode buffer: skip == 0, own == tables
            self._window_decode_meta(meta, own, own_lens)
            return order
        if meta.buffer is not None:
            kpos = torch.arange(meta.buffer.max_length, device=dev)
            allowed = kpos[None, :] < meta.buffer.lengths[:, None]
            meta.decode_mask = additive(allowed)[:, None, None]
            return order
        m = max(len(t) for t in own)
        padded = torch.tensor([t + [0] * (m - len(t)) for t in own], dtype=torch.long, device=dev)
        kpos = torch.arange(m * bs, device=dev)
        lens_t = torch.tensor(own_lens, device=dev)
        allowed = kpos[None, :] < lens_t[:, None]
        mask = additive(allowed)
        meta.decode_blocks = padded.flatten()
        meta.decode_mask = mask.view(1, len(items), 1, m * bs)
        meta.decode_max_blocks = m
        return order

    def _cascade_meta(self, groups: list[tuple[list[int], list[int]]], num_rows: int) -> Cascade:
        """Pads the groups to one shape [Gr, R rows, P blocks]; padding repeats a real row or block."""
        bs, dev = self.block_size, self.device
        max_rows, max_blocks = max(len(r) for r, _ in groups), max(len(p) for _, p in groups)
        rows, blocks, back, group_of_row = [], [], [len(groups) * max_rows] * num_rows, [-1] * num_rows
        for gi, (members, shared) in enumerate(groups):
            for j, i in enumerate(members):
                back[i], group_of_row[i] = gi * max_rows + j, gi
            rows += members + [members[0]] * (max_rows - len(members))
            blocks += shared + [shared[0]] * (max_blocks - len(shared))
        shared_tokens = torch.tensor([len(shared) * bs for _, shared in groups], device=dev)
        allowed = torch.arange(max_blocks * bs, device=dev)[None, :] < shared_tokens[:, None]  # [Gr, P * bs]
        mask = additive(allowed)
        keep = self.block_generation is not None and \
            self.cache.prefix_bytes(len(blocks)) <= self.config.cascade_prefix_bytes
        key = tuple((b, self.block_generation[b]) for b in blocks) if keep else None
        return Cascade(torch.tensor(blocks, device=dev), mask.view(1, len(groups), 1, -1),
                       torch.tensor(rows, device=dev), torch.tensor(back, device=dev), len(groups), max_rows,
                       shared_tokens, torch.tensor(group_of_row, device=dev), key)


def additive(allowed: torch.Tensor) -> torch.Tensor:
    """A boolean mask as an additive fp32 one (0 where allowed, -inf elsewhere), on its device."""
    return allowed.new_zeros(allowed.shape, dtype=torch.float32).masked_fill_(~allowed, float("-inf"))


def shared_prefixes(tables: list[list[int]]) -> list[tuple[list[int], list[int]]]:
    """Groups of decode rows (2 or more) whose tables start with the same blocks, with those blocks.

    A block id in two tables is a full, cached block (only those are shared), so a row's shared
    prefix is its leading blocks that another row also holds; rows with the same such prefix (the
    n samples of a prompt) form a group. A row's last block, which takes its new token, is its own."""
    holders: dict[int, int] = {}
    for t in tables:
        for block in t[:-1]:
            holders[block] = holders.get(block, 0) + 1
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, t in enumerate(tables):
        n = 0
        while n < len(t) - 1 and holders[t[n]] > 1:
            n += 1
        if n:
            groups.setdefault(tuple(t[:n]), []).append(i)
    return [(rows, list(prefix)) for prefix, rows in groups.items() if len(rows) > 1]
