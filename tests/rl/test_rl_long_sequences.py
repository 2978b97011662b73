"""Long sequences in the trainer: the [tokens, vocab] logits never exist, and activation checkpointing turns
itself on by a micro-batch's length."""

import pytest
import torch
from conftest import make_model
from torch.utils._python_dispatch import TorchDispatchMode

from temper.rl import RLConfig, Trainer
from temper.trajectory import Trajectory

VOCAB = 4096  # large against the tiny model's width (32), as a real vocabulary is against its tokens' states


class LargestTensor(TorchDispatchMode):
    """The most elements of any tensor an op returns while active (forward and backward alike)."""

    def __init__(self):
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def _long_group(length: int, prompt: int = 8) -> list[Trajectory]:
    """Two samples of `length` tokens sharing a prompt, one right and one wrong: every reply token carries loss."""
    g = torch.Generator().manual_seed(length)
    head = torch.randint(0, VOCAB, (prompt,), generator=g).tolist()
    out = []
    for k in range(2):
        ids = head + torch.randint(0, VOCAB, (length - prompt,), generator=g).tolist()
        mask = [0] * prompt + [1] * (length - prompt)
        out.append(Trajectory(ids, mask, [-8.0 if m else 0.0 for m in mask], [0 if m else -1 for m in mask],
                              reward=float(k), group_id="g", id=f"t{k}"))
    return out


def _cfg(**trainer) -> RLConfig:
    cfg = RLConfig()
    cfg.optim.lr = 1e-3
    for k, v in trainer.items():
        setattr(cfg.trainer, k, v)
    return cfg


def _largest_in_step(length: int, chunk: int) -> int:
    tr = Trainer(make_model(vocab_size=VOCAB), _cfg(logits_chunk=chunk))
    with LargestTensor() as seen:
        m = tr.step(_long_group(length))
    assert not m.skipped and m.update.grad_norm > 0
    return seen.numel


def test_a_step_never_allocates_the_tokens_x_vocab_logits():
    """The largest tensor of a step stays the same as its length doubles (a chunk of logits, the embedding's
    gradient): it grows with neither T x V nor T^2. The test can fail: with one chunk for every token, the
    step does allocate [T, V]."""
    small, large = _largest_in_step(256, chunk=64), _largest_in_step(512, chunk=64)
    loss_tokens = 2 * (512 - 8)
    assert large == small
    assert large < loss_tokens * VOCAB / 4
    assert _largest_in_step(512, chunk=4096) >= loss_tokens * VOCAB


@pytest.mark.parametrize("from_tokens,recomputed", [(None, False), (10_000, False), (100, True)])
def test_checkpointing_turns_itself_on_by_length(from_tokens, recomputed):
    """From `checkpoint_from_tokens` tokens a micro-batch's decoder layers run twice (forward, then again in
    backward); the step trains the same weights either way."""
    group = _long_group(64)
    plain = Trainer(make_model(vocab_size=VOCAB), _cfg(checkpoint_from_tokens=None))
    tr = Trainer(make_model(vocab_size=VOCAB), _cfg(checkpoint_from_tokens=from_tokens))
    calls = []
    layer = tr.model.model.layers[0]
    forward = layer.forward  # counted on the method itself: the recomputation in backward calls it again
    layer.forward = lambda *a, **k: calls.append(1) or forward(*a, **k)
    plain.step(group)
    tr.step(group)
    micro_batches = 1  # both samples in one packed row: 8 + 2 x 56 = 120 tokens
    assert len(calls) == micro_batches * (2 if recomputed else 1)
    for (name, a), b in zip(plain.model.named_parameters(), tr.model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_a_sequence_over_the_trainers_limit_is_cut_and_counted():
    """trainer.max_sequence_tokens: each sample is cut to its first 40 tokens, counted in the step's metrics,
    and the step trains what the cut trajectories would."""
    group = _long_group(64)
    tr = Trainer(make_model(vocab_size=VOCAB), _cfg(max_sequence_tokens=40))
    m = tr.step(group)
    assert (m.truncated, m.truncated_tokens) == (2, 2 * 24)
    assert m.update.tokens == 8 + 2 * 32  # the shared prompt once, then each sample's rest up to the limit
    assert m.as_metrics()["truncated"] == 2.0 and m.as_metrics()["truncated_tokens"] == 48.0
    cut = [Trajectory(t.token_ids[:40], t.loss_mask[:40], t.logprobs[:40], t.versions[:40], reward=t.reward,
                      group_id=t.group_id, id=t.id) for t in group]
    ref = Trainer(make_model(vocab_size=VOCAB), _cfg())
    assert ref.step(cut).truncated == 0
    for (name, a), b in zip(ref.model.named_parameters(), tr.model.parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_no_loss_token_still_reaches_the_model_in_backward():
    """A context-parallel rank whose share of a sequence has no loss token still runs its backward through the
    model (its ring attention and FSDP collectives wait for it): the empty logprobs stay in the graph."""
    from temper.rl.logprobs import token_logprobs

    model = make_model()
    hidden = model(torch.tensor([[1, 2, 3]]))[0]
    logp, _ = token_logprobs(model.lm_head, hidden[:0], torch.tensor([], dtype=torch.long))
    assert logp.shape == (0,) and logp.grad_fn is not None
    logp.sum().backward()
    assert model.model.layers[0].mlp.up_proj.weight.grad is not None
