"""Per-token logprobs and entropy without materialising [tokens, vocab] logits for the whole batch.

Only the positions that predict a loss token are projected to the vocabulary, in chunks; with
gradients on, each chunk is recomputed in the backward pass (activation checkpointing), so the
peak is one chunk of logits, not all of them (49k vocab x 4k tokens x 4 bytes = 800 MB otherwise).
"""

import torch
from torch.utils.checkpoint import checkpoint


def _chunk(lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    logits = lm_head(hidden).float()
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets[:, None]).squeeze(-1) - lse
    probs = torch.softmax(logits, dim=-1)
    entropy = lse - (probs * logits).sum(-1)
    return logp, entropy


def token_logprobs(lm_head: torch.nn.Module, hidden: torch.Tensor, targets: torch.Tensor, chunk: int = 1024
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """hidden [N, H] (the predicting positions), targets [N] -> (logprob [N], entropy [N]) in fp32."""
    if hidden.shape[0] == 0:
        empty = hidden.new_zeros(0, dtype=torch.float32)
        return empty, empty
    grad = torch.is_grad_enabled() and hidden.requires_grad
    logps, ents = [], []
    for s in range(0, hidden.shape[0], chunk):
        h, t = hidden[s:s + chunk], targets[s:s + chunk]
        lp, ent = checkpoint(_chunk, lm_head, h, t, use_reentrant=False) if grad else _chunk(lm_head, h, t)
        logps.append(lp)
        ents.append(ent)
    return torch.cat(logps), torch.cat(ents)


def micro_batch_logprobs(model: torch.nn.Module, mb, chunk: int = 1024, with_hidden: bool = False):
    """Forward a MicroBatch and return (logprob, entropy[, selected hidden]) of its loss tokens."""
    attention = mb.attention(getattr(model.config, "sliding_window", None))
    hidden = model(mb.input_ids, mb.positions, attention)
    sel = hidden.reshape(-1, hidden.shape[-1])[mb.index]
    lp, ent = token_logprobs(model.lm_head, sel, mb.targets, chunk)
    return (lp, ent, sel) if with_hidden else (lp, ent)
