"""Per-token logprobs and entropy without materialising [tokens, vocab] logits for the whole batch.

Only the positions that predict a loss token are projected to the vocabulary, in chunks; with
gradients on, each chunk is recomputed in the backward pass (activation checkpointing), so the
peak is one chunk of logits, not all of them (49k vocab x 4k tokens x 4 bytes = 800 MB otherwise).

`temperature` is the rollouts' sampling temperature: logits are divided by it first, as the engine
does before it records a sampled token's logprob, so that pi_old, the policy ratio and the
train/inference mismatch all compare the same distribution.
"""

import torch
from torch.utils.checkpoint import checkpoint


def _chunk(lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0
           ) -> tuple[torch.Tensor, torch.Tensor]:
    logits = lm_head(hidden).float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    probs = torch.softmax(logits, dim=-1)
    entropy = lse - (probs * logits).sum(-1)
    return logp, entropy


def token_logprobs(lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, chunk: int = 1024,
                   temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [N, H] (the predicting positions), targets [N] -> (logprob [N], entropy [N]) in fp32."""
    if hidden.shape[0] == 0:
        # none here (a context-parallel rank whose share of a sequence has no loss token): empty, but still in the
        # graph, so that this rank's backward runs and meets the other ranks' collectives
        empty = hidden[:, 0].float()
        return empty, empty
    grad = torch.is_grad_enabled() and hidden.requires_grad
    logps, ents = [], []
    for s in range(0, hidden.shape[0], chunk):
        h, t = hidden[s:s + chunk], targets[s:s + chunk]
        lp, ent = (checkpoint(_chunk, lm_head, h, t, temperature, use_reentrant=False) if grad
                   else _chunk(lm_head, h, t, temperature))
        logps.append(lp)
        ents.append(ent)
    return torch.cat(logps), torch.cat(ents)


def micro_batch_logprobs(model: torch.nn.Module, mb, chunk: int = 1024, with_hidden: bool = False,
                         temperature: float = 1.0):
    """Forward a MicroBatch and return (logprob, entropy[, selected hidden]) of its loss tokens."""
    attention = mb.attention(getattr(model.config, "sliding_window", None))
    hidden = model(mb.input_ids, mb.positions, attention)
    sel = hidden.reshape(-1, hidden.shape[-1])[mb.index]
    lp, ent = token_logprobs(model.lm_head, sel, mb.targets, chunk, temperature)
    return (lp, ent, sel) if with_hidden else (lp, ent)
