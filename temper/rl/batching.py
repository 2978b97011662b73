"""From sequences to model inputs: packed rows or padded rows, cut into micro-batches by a token budget.

A `Sample` is one sequence with per-token values (advantage, behaviour logprob, loss weight...).
A `MicroBatch` is what one forward pass sees: rows of token ids with position ids that restart at
every packed sequence, the segment layout for the attention backend, and flat per-loss-token values.
The logprob of token j is read from the hidden state at position j - 1 of the same sequence.

Packed samples that start with the same prompt (the tokens before their first loss token: a GRPO group's
samples) share it: the prompt is laid out once, then each sample's rest, which attends to the prompt and to
itself (SegmentAttention). The prompt's hidden states are the same numbers for every sample, so each loss
token's logprob and the gradient are those of the samples laid out apart, for one forward of the prompt
instead of one per sample.
"""

from dataclasses import dataclass, field, fields

import torch

from temper.models.attention import AttentionBackend, CausalAttention
from temper.rl.packed_attention import SegmentAttention


@dataclass
class Sample:
    tokens: torch.Tensor  # [n] long
    mask: torch.Tensor  # [n] bool: token j carries loss (j = 0 never does: nothing predicts it)
    values: dict[str, torch.Tensor] = field(default_factory=dict)  # per-token float [n]

    def __post_init__(self) -> None:
        self.mask = self.mask.bool().clone()
        self.mask[0] = False

    @property
    def num_loss_tokens(self) -> int:
        return int(self.mask.sum())


@dataclass
class TokenValues:
    """A micro-batch's values per loss token, each [N]: first what its samples carried (a key of `Sample.values`
    a sample lacks is zeros), then what the trainer computes for the step."""

    adv: torch.Tensor  # advantage (the critic's per-token ones under gae)
    behaviour: torch.Tensor  # logprob under the policy that sampled the token (mu)
    version: torch.Tensor | None = None  # policy version that sampled the token (rollouts only)
    keep: torch.Tensor | None = None  # 1 on a real loss token; 0 on fillers' and off-policy-masked ones
    old_logp: torch.Tensor | None = None  # pi_old, recomputed (or the behaviour logprobs standing in)
    ref_logp: torch.Tensor | None = None  # the reference model's (KL penalty)
    is_weight: torch.Tensor | None = None  # truncated importance weight pi_old / mu
    weight: torch.Tensor | None = None  # loss weight: weight * loss summed over the step aggregates it
    old_values: torch.Tensor | None = None  # the critic's values before the update (gae)
    returns: torch.Tensor | None = None  # GAE returns (gae)

    SAMPLED = ("adv", "behaviour", "version")  # the fields a Sample's values may carry

    def to(self, device: torch.device) -> "TokenValues":
        return TokenValues(**{f.name: None if (t := getattr(self, f.name)) is None else t.to(device)
                              for f in fields(self)})


Unit = int | list[int]  # a sample's index, or the indices of samples that share their prompt (laid out once)
Segment = int | tuple[int, tuple[int, ...]]  # a sequence's length, or (shared prompt, the rests' lengths)


@dataclass
class MicroBatch:
    input_ids: torch.Tensor  # [B, T]
    positions: torch.Tensor  # [B, T]
    segments: list[list[Segment]]  # per row: its sequences (then the padding's length, if any)
    packed: bool
    padding_mask: torch.Tensor  # [B, T], 1 on real tokens
    index: torch.Tensor  # [N] flat index (b * T + t) of the position that predicts each loss token
    targets: torch.Tensor  # [N]
    seq_index: torch.Tensor  # [N] which of `sample_ids` each loss token belongs to
    sample_ids: list[int]
    values: TokenValues  # per loss token [N]
    filler: bool = False  # a zero-weight stand-in that keeps the ranks' collectives in step
    # context parallelism (context_parallel.py): this rank's share of one sequence of `context_length` tokens,
    # whose attention is a ring over `context_group`
    context_group: object = None
    context_length: int = 0

    @property
    def num_tokens(self) -> int:
        return int(self.padding_mask.sum())

    def attention(self, sliding_window: int | None = None) -> AttentionBackend:
        if self.context_group is not None:
            from temper.rl.ring_attention import RingAttention

            return RingAttention(self.context_length, self.context_group, sliding_window)
        if self.packed:
            return SegmentAttention(self.segments, sliding_window)
        padded = bool((self.padding_mask == 0).any())
        return CausalAttention(self.padding_mask if padded else None, sliding_window)


def collate(samples: list[Sample], rows: list[list[Unit]], packed: bool, pad_id: int = 0) -> MicroBatch:
    """Lay out rows of units (several per row when packed, one sample each when padded) as one micro-batch."""
    lengths = [sum(_unit_length(samples, u) for u in row) for row in rows]
    big_t = max(lengths)
    ids = torch.full((len(rows), big_t), pad_id, dtype=torch.long)
    pos = torch.zeros((len(rows), big_t), dtype=torch.long)
    pmask = torch.zeros((len(rows), big_t), dtype=torch.long)
    keys = sorted({k for row in rows for u in row for i in _members(u) for k in samples[i].values})
    if unknown := set(keys) - set(TokenValues.SAMPLED):
        raise ValueError(f"Sample values {sorted(unknown)}: a sample carries only {', '.join(TokenValues.SAMPLED)}")
    keys = sorted({*keys, "adv", "behaviour"})  # every micro-batch has both (zeros where no sample gave them)
    index, targets, seq_index, sample_ids = [], [], [], []
    values: dict[str, list[torch.Tensor]] = {k: [] for k in keys}
    segments: list[list[Segment]] = []

    def place(b: int, offset: int, tokens: torch.Tensor, start: int) -> int:
        ids[b, offset:offset + len(tokens)] = tokens
        pos[b, offset:offset + len(tokens)] = torch.arange(start, start + len(tokens))
        pmask[b, offset:offset + len(tokens)] = 1
        return offset + len(tokens)

    def loss_tokens(i: int, predictor: torch.Tensor) -> None:
        """Sample i's loss tokens j, each read from the flat position `predictor[k]` (that of token j - 1)."""
        s, j = samples[i], samples[i].mask.nonzero().flatten()
        index.append(predictor)
        targets.append(s.tokens[j])
        seq_index.append(torch.full((len(j),), len(sample_ids), dtype=torch.long))
        sample_ids.append(i)
        for k in keys:
            values[k].append(s.values[k][j].float() if k in s.values else torch.zeros(len(j)))

    for b, row in enumerate(rows):
        offset, seg = 0, []
        for u in row:
            if isinstance(u, int):  # a sequence of its own
                start, offset = offset, place(b, offset, samples[u].tokens, 0)
                loss_tokens(u, b * big_t + start + samples[u].mask.nonzero().flatten() - 1)
                seg.append(len(samples[u].tokens))
                continue
            p = _prompt_length(samples[u[0]])  # the shared prompt once, then each sample's rest after it
            prompt_at, offset = offset, place(b, offset, samples[u[0]].tokens[:p], 0)
            rests = []
            for i in u:
                rest_at, offset = offset, place(b, offset, samples[i].tokens[p:], p)
                before = samples[i].mask.nonzero().flatten() - 1  # the position predicting each loss token
                loss_tokens(i, b * big_t + torch.where(before < p, prompt_at + before, rest_at + before - p))
                rests.append(len(samples[i].tokens) - p)
            seg.append((p, tuple(rests)))
        if offset < big_t:
            seg.append(big_t - offset)
        segments.append(seg)
    return MicroBatch(
        input_ids=ids, positions=pos, segments=segments, packed=packed, padding_mask=pmask,
        index=torch.cat(index), targets=torch.cat(targets), seq_index=torch.cat(seq_index), sample_ids=sample_ids,
        values=TokenValues(**{k: torch.cat(v) for k, v in values.items()}),
    )


def _members(u: Unit) -> list[int]:
    return [u] if isinstance(u, int) else u


def _prompt_length(s: Sample) -> int:
    """The tokens before the first loss token (all of them if none carries loss)."""
    j = s.mask.nonzero().flatten()
    return int(j[0]) if len(j) else len(s.tokens)


def _unit_length(samples: list[Sample], u: Unit) -> int:
    if isinstance(u, int):
        return len(samples[u].tokens)
    p = _prompt_length(samples[u[0]])
    return p + sum(len(samples[i].tokens) - p for i in u)


def shared_prompt_units(samples: list[Sample], indices: list[int], budget: int) -> list[Unit]:
    """`indices` as units: samples with the same prompt (of 2+ tokens) together, as many per unit as fit
    `budget` (at least two), the others alone; in the order of each unit's first sample."""
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for i in indices:
        p = _prompt_length(samples[i])
        key = tuple(samples[i].tokens[:p].tolist()) if p >= 2 else (i, -1)  # -1: no prompt is that
        by_prompt.setdefault(key, []).append(i)
    units: list[Unit] = []
    for members in by_prompt.values():
        unit: list[int] = []
        for i in members:
            if len(unit) >= 2 and _unit_length(samples, [*unit, i]) > budget:
                units.append(unit)
                unit = []
            unit.append(i)
        units.append(unit if len(unit) > 1 else unit[0])
    return units


def pack_rows(lengths: list[int], budget: int) -> list[list[int]]:
    """First-fit decreasing: group sequence indices into rows of at most `budget` tokens.

    A sequence longer than the budget gets a row of its own (it is never split).
    """
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    rows: list[list[int]] = []
    room: list[int] = []
    for i in order:
        for r, free in enumerate(room):
            if lengths[i] <= free:
                rows[r].append(i)
                room[r] -= lengths[i]
                break
        else:
            rows.append([i])
            room.append(budget - lengths[i])
    return [sorted(r) for r in rows]


def padded_groups(lengths: list[int], budget: int) -> list[list[int]]:
    """In order, group sequences while (count x longest) stays within `budget` padded tokens."""
    groups: list[list[int]] = []
    cur: list[int] = []
    longest = 0
    for i, n in enumerate(lengths):
        if cur and (len(cur) + 1) * max(longest, n) > budget:
            groups.append(cur)
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, n)
    if cur:
        groups.append(cur)
    return groups


def make_micro_batches(samples: list[Sample], budget: int, packing: bool, pad_id: int = 0,
                       share_prompts: bool = True, indices: list[int] | None = None) -> list[MicroBatch]:
    """Packed: one row of at most `budget` tokens per micro-batch, samples with the same prompt sharing it
    (`share_prompts`). Padded: rows of one sequence each. `indices`: only these samples (default: all)."""
    chosen = range(len(samples)) if indices is None else indices
    samples_with_loss = [i for i in chosen if samples[i].num_loss_tokens > 0]
    if packing:
        units = (shared_prompt_units(samples, samples_with_loss, budget) if share_prompts
                 else list(samples_with_loss))
        rows = pack_rows([_unit_length(samples, u) for u in units], budget)
        layout: list[list[list[Unit]]] = [[[units[i] for i in row]] for row in rows]
    else:
        lengths = [len(samples[i].tokens) for i in samples_with_loss]
        layout = [[[samples_with_loss[i]] for i in g] for g in padded_groups(lengths, budget)]
    return [collate(samples, rows, packing, pad_id) for rows in layout]


def truncate_sample(s: Sample, limit: int) -> Sample:
    """The first `limit` tokens of a sample, its loss mask and values cut with them."""
    if len(s.tokens) <= limit:
        return s
    return Sample(s.tokens[:limit], s.mask[:limit], {k: v[:limit] for k, v in s.values.items()})


def trajectory_sample(traj, advantage: float | torch.Tensor) -> Sample:
    """A Trajectory as a Sample: its model tokens carry the advantage, their behaviour logprobs and the
    policy version that sampled each."""
    tokens = torch.tensor(traj.token_ids, dtype=torch.long)
    mask = torch.tensor(traj.loss_mask, dtype=torch.bool)
    adv = advantage if isinstance(advantage, torch.Tensor) else torch.full((len(tokens),), float(advantage))
    return Sample(tokens, mask, {"adv": adv, "behaviour": torch.tensor(traj.logprobs, dtype=torch.float32),
                                 "version": torch.tensor(traj.versions, dtype=torch.float64)})
