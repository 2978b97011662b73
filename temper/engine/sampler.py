"""Turn logits into tokens and the logprobs the trainer needs.

Logprobs are log_softmax(logits / temperature) of the sampled token (temperature 0: plain
log_softmax), taken before penalties and before top-k/top-p/min-p truncation: that is the
distribution the trainer recomputes from the same weights (a structured request's are over the
tokens its grammar allows: the distribution it was sampled from). Sampling itself then applies
penalties and truncation, and draws by inverse CDF with one uniform from the sample's own
seeded generator, so results do not depend on batch composition, preemption or timing.
Everything runs on the logits' device; the uniforms come from the samples' host generators (the
same draws on every device, moved in one small copy), and only the sampled ids and their
logprobs come back to the host.
"""

import torch

from temper import native
from temper.engine.grammar import apply_bitmask
from temper.engine.sequence import Sequence


def apply_penalties(logits: torch.Tensor, seq: Sequence) -> torch.Tensor:
    p = seq.params
    if p.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(seq.token_ids)), dtype=torch.long, device=logits.device)
        vals = logits[seen]
        logits[seen] = torch.where(vals > 0, vals / p.repetition_penalty, vals * p.repetition_penalty)
    if (p.presence_penalty or p.frequency_penalty) and seq.num_output_tokens:
        out = torch.tensor(seq.output_token_ids, dtype=torch.long, device=logits.device)
        counts = torch.bincount(out, minlength=logits.shape[-1]).to(logits.dtype)
        logits -= p.frequency_penalty * counts + p.presence_penalty * (counts > 0).to(logits.dtype)
    return logits


def truncate(logits: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    """Mask (to -inf) what top-k, top-p and min-p exclude; logits are already temperature-scaled."""
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k).values[-1]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, descending=True)
        probs = sorted_logits.softmax(-1)
        cum = probs.cumsum(-1)
        drop = (cum - probs) > top_p  # keep the smallest prefix whose mass reaches top_p
        logits = logits.clone()
        logits[order[drop]] = float("-inf")
    if min_p > 0.0:
        probs = logits.softmax(-1)
        logits = logits.masked_fill(probs < min_p * probs.max(), float("-inf"))
    return logits


def inverse_cdf(probs: torch.Tensor, u: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """The first token whose cumulative probability reaches u * total, per row ([R, V] -> [R]).

    Two levels, both summed in float64: the block holding the target from per-block sums, then a
    cumulative sum within that block only (a full-vocabulary float64 cumsum cost ~3x as much)."""
    r, v = probs.shape
    nb = -(-v // block)
    blocks = (torch.nn.functional.pad(probs, (0, nb * block - v)) if nb * block != v else probs).view(r, nb, block)
    block_cdf = blocks.sum(-1, dtype=torch.float64).cumsum_(-1)  # [R, nb]
    target = u * block_cdf[:, -1]
    b = torch.searchsorted(block_cdf, target[:, None])[:, 0].clamp_(max=nb - 1)
    before = torch.cat([block_cdf.new_zeros(r, 1), block_cdf], 1).gather(1, b[:, None])  # mass of blocks before b
    inner = blocks[torch.arange(r, device=probs.device), b].double().cumsum_(-1) + before  # [R, block]
    j = torch.searchsorted(inner, target[:, None])[:, 0]
    return (b * block + j.clamp_(max=block - 1)).clamp_(max=v - 1)


class Sampler:
    def __init__(self, native: bool = False):
        """`native`: batches of plain samples (temperature only, no top logprobs, no grammar; an RL rollout's)
        on the CPU are drawn by temper.native's one-pass kernel: the same two-level inverse CDF."""
        self.native = native
        self.native_rows = 0  # rows the kernel drew (tests: it really ran)

    def __call__(self, logits: torch.Tensor, seqs: list[Sequence],
                 masks: tuple[torch.Tensor, list[int]] | None = None) -> tuple[list[int], list[float], list]:
        """logits [R, V] (one row per seq entry; a fresh tensor, changed in place) -> tokens, their
        logprobs, top alternatives (or None). `masks`: the grammar bitmask of constrained rows."""
        temps = [s.params.temperature or 1.0 for s in seqs]
        if self.native and seqs and masks is None and logits.device.type == "cpu" and \
                logits.dtype == torch.float32 and all(_plain(s) and not (s.params.greedy or s.params.logprobs)
                                                      for s in seqs):
            u = torch.cat([uniform(s) for s in seqs])
            tokens, chosen = native.sample_plain(logits, torch.tensor(temps, device=logits.device), u)
            self.native_rows += len(seqs)
            return tokens.tolist(), chosen.tolist(), [None] * len(seqs)
        logits = logits.float()
        if masks is not None:  # structured outputs: sampled from, and logprobs of, the allowed tokens only
            apply_bitmask(logits, masks)
        scaled = logits
        if any(t != 1.0 for t in temps):
            scaled = scaled / torch.tensor(temps, dtype=torch.float32, device=logits.device)[:, None]
        tokens = [0] * len(seqs)
        greedy = [i for i, s in enumerate(seqs) if s.params.greedy and not _penalized(s)]
        plain = [i for i, s in enumerate(seqs) if not s.params.greedy and _plain(s)]
        if plain:  # one exp pass serves both the normaliser and plain sampling (its weights, unnormalised)
            peak = scaled.amax(-1, keepdim=True)
            weights = (scaled - peak).exp_()
            lse = peak + weights.sum(-1, keepdim=True).log_()
        else:
            lse = torch.logsumexp(scaled, dim=-1, keepdim=True)
        if greedy:
            for i, t in zip(greedy, scaled[greedy].argmax(-1).tolist(), strict=True):
                tokens[i] = t
        # Plain sampling (no penalty, no truncation) draws from the weights computed above: inverse_cdf
        # scales its uniform by each row's total, so they need no normalising.
        if plain:
            probs = weights if len(plain) == len(seqs) else weights[plain]  # all rows: no copy
            u = torch.cat([uniform(seqs[i]) for i in plain]).to(logits.device)
            for i, t in zip(plain, inverse_cdf(probs, u).tolist(), strict=True):
                tokens[i] = t
        for i in set(range(len(seqs))) - set(greedy) - set(plain):
            seq, p = seqs[i], seqs[i].params
            row = apply_penalties(logits[i].float().clone(), seq)
            if p.greedy:
                tokens[i] = int(row.argmax())
                continue
            probs = truncate(row / p.temperature, p.top_k, p.top_p, p.min_p).softmax(-1)
            tokens[i] = int(inverse_cdf(probs[None], uniform(seq).to(logits.device))[0])
        idx = torch.tensor(tokens, dtype=torch.long, device=logits.device)
        chosen = (scaled.gather(1, idx[:, None]) - lse)[:, 0].tolist()
        tops: list = [None] * len(seqs)
        k = max((s.params.logprobs for s in seqs), default=0)
        if k:
            vals, ids = torch.topk(scaled, k, dim=-1)
            vals -= lse
            for i, seq in enumerate(seqs):
                n = seq.params.logprobs
                if n:
                    tops[i] = dict(zip(ids[i, :n].tolist(), vals[i, :n].tolist(), strict=True))
        return tokens, chosen, tops


def uniform(seq: Sequence) -> torch.Tensor:
    """One float64 uniform [1] from the sample's own generator, which lives on the host (the same
    draws whatever the device)."""
    return torch.rand(1, generator=seq.generator, dtype=torch.float64)


def _plain(seq: Sequence) -> bool:
    p = seq.params
    return not _penalized(seq) and p.top_k == 0 and p.top_p == 1.0 and p.min_p == 0.0


def _penalized(seq: Sequence) -> bool:
    p = seq.params
    return p.repetition_penalty != 1.0 or bool(p.presence_penalty) or bool(p.frequency_penalty)
