"""Packed rows give the same logprobs, loss and gradients as one sequence at a time and as padded rows."""

import pytest
import torch
from conftest import make_model

from temper.models import CausalAttention
from temper.models.attention import causal_mask, sdpa
from temper.rl.batching import Sample, make_micro_batches, pack_rows, padded_groups
from temper.rl.logprobs import micro_batch_logprobs, token_logprobs
from temper.rl.packed_attention import SegmentAttention


def _samples(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in lengths:
        tokens = torch.randint(0, 64, (n,), generator=g)
        mask = torch.zeros(n, dtype=torch.bool)
        mask[n // 3:] = True
        out.append(Sample(tokens, mask, {"adv": torch.rand(n, generator=g)}))
    return out


def _loss_and_grads(model, mbs):
    model.zero_grad()
    total = 0.0
    for mb in mbs:
        logp, _ = micro_batch_logprobs(model, mb, chunk=7)
        loss = (logp * mb.values.adv).sum()
        loss.backward()
        total += float(loss.detach())
    return total, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_pack_rows_and_padded_groups():
    assert pack_rows([5, 3, 4, 2], budget=7) == [[0, 3], [1, 2]]
    assert pack_rows([9, 2], budget=7) == [[0], [1]]  # too long for the budget: a row of its own
    assert padded_groups([2, 2, 5, 1], budget=8) == [[0, 1], [2], [3]]


def test_positions_restart_and_loss_tokens_point_at_predicting_positions():
    samples = _samples([5, 4])
    (mb,) = make_micro_batches(samples, budget=16, packing=True)
    assert mb.input_ids.shape == (1, 9) and mb.segments == [[5, 4]]
    assert mb.positions[0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    # sample 0 trains on tokens 1..4 (read at positions 0..3); sample 1 (offset 5) on tokens 1..3
    assert mb.index.tolist() == [0, 1, 2, 3, 5, 6, 7]
    assert mb.targets.tolist() == samples[0].tokens[1:].tolist() + samples[1].tokens[1:].tolist()
    assert mb.seq_index.tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_segment_attention_matches_separate_sequences():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 12, 4, 8), torch.randn(1, 12, 2, 8), torch.randn(1, 12, 2, 8)
    out = SegmentAttention([[5, 7]])(0, q, k, v)
    for s, e in ((0, 5), (5, 12)):
        ref = CausalAttention()(0, q[:, s:e], k[:, s:e], v[:, s:e])
        torch.testing.assert_close(out[:, s:e], ref, rtol=0, atol=0)


@pytest.mark.parametrize(("prompt", "rest"), [(5, 7), (64, 3), (3, 100), (1, 1)])
def test_a_shared_prompts_rest_attends_without_a_mask_and_matches_the_masked_one(monkeypatch, prompt, rest):
    """A rest's attention is two mask-free flash calls merged by log-sum-exp (a [n, P + n] mask costs memory
    quadratic in the length): outputs and gradients equal the masked reference, and no mask is built."""
    g = torch.Generator().manual_seed(prompt)
    q, k, v = (torch.randn(1, prompt + rest, h, 16, dtype=torch.float64, generator=g, requires_grad=True)
               for h in (6, 2, 2))
    dout = torch.randn(1, rest, 6, 16, dtype=torch.float64, generator=g)
    ref = sdpa(q[:, prompt:], k, v, causal_mask(rest, prompt + rest, q.device), causal=True)
    ref_grads = torch.autograd.grad((ref * dout).sum(), (q, k, v))

    def no_mask(*a, **kw):
        raise AssertionError(f"a mask was built: {a}")

    monkeypatch.setattr("temper.rl.packed_attention.causal_mask", no_mask)
    out = SegmentAttention([[(prompt, (rest,))]])(0, q, k, v)[:, prompt:]
    grads = torch.autograd.grad((out * dout).sum(), (q, k, v))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-12)


def test_a_shared_prompts_rest_keeps_bfloat16_as_autocast_gives_it():
    """Under `dtype: bfloat16` the projections hand attention bf16 tensors: the rest's output stays bf16 and its
    backward runs, close to the fp32 result."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 12, h, 16, generator=g) for h in (6, 2, 2))
    att = SegmentAttention([[(5, (7,))]])
    want = att(0, q, k, v)
    qb, kb, vb = (x.bfloat16().requires_grad_() for x in (q, k, v))
    got = att(0, qb, kb, vb)
    assert got.dtype == torch.bfloat16
    got.float().sum().backward()
    assert all(x.grad is not None and x.grad.dtype == torch.bfloat16 for x in (qb, kb, vb))
    torch.testing.assert_close(got.float(), want, rtol=0, atol=3e-2)


def test_packed_equals_padded_equals_one_by_one():
    model = make_model().train()
    samples = _samples([7, 13, 4, 10, 6])
    one = [mb for s in range(len(samples)) for mb in make_micro_batches([samples[s]], 100, True)]
    packed = make_micro_batches(samples, budget=24, packing=True)
    padded = make_micro_batches(samples, budget=30, packing=False)
    assert len(packed) < len(samples) and any(len(mb.segments[0]) > 1 for mb in packed)
    assert any(mb.input_ids.shape[0] > 1 for mb in padded)
    ref_loss, ref_grads = _loss_and_grads(model, one)
    for mbs in (packed, padded):
        loss, grads = _loss_and_grads(model, mbs)
        assert abs(loss - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
        for name, g in grads.items():
            torch.testing.assert_close(g, ref_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_chunked_logprobs_match_full_log_softmax_and_gradients():
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    h = torch.randn(23, 16, requires_grad=True)
    t = torch.randint(0, 50, (23,))
    lp, ent = token_logprobs(head, h, t, chunk=5)
    full = torch.log_softmax(head(h), -1)
    torch.testing.assert_close(lp, full.gather(-1, t[:, None]).squeeze(-1))
    torch.testing.assert_close(ent, -(full.exp() * full).sum(-1))
    lp.sum().backward()
    g_chunked = h.grad.clone()
    h.grad = None
    full.gather(-1, t[:, None]).sum().backward()
    torch.testing.assert_close(g_chunked, h.grad)


def _groups(prompts, rests, seed=1, turns=False):
    """Samples in groups that share a prompt (a GRPO group's): prompt p, then a reply of its own (with, for
    `turns`, an observation and a second reply, whose loss tokens come after tokens that carry none)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for p, rest in zip(prompts, rests, strict=True):
        prompt = torch.randint(0, 64, (p,), generator=g)
        for n in rest:
            tokens = torch.cat([prompt, torch.randint(0, 64, (n,), generator=g)])
            mask = torch.zeros(p + n, dtype=torch.bool)
            mask[p:] = True
            if turns and n > 3:
                mask[p + n // 2: p + n // 2 + 2] = False  # an observation in the middle
            out.append(Sample(tokens, mask, {"adv": torch.rand(p + n, generator=g)}))
    return out


def _by_sample(mbs, values):
    """sample index -> its loss tokens' values, whatever the layout."""
    out = {}
    for mb, v in zip(mbs, values, strict=True):
        for j, s in enumerate(mb.sample_ids):
            out[s] = v[mb.seq_index == j]
    return out


def test_samples_that_share_a_prompt_forward_it_once_with_the_same_logprobs_and_gradients():
    model = make_model().train()
    samples = _groups([9, 6, 1], [[5, 3, 7, 4], [8, 2], [4, 4]], turns=True)  # a 1-token prompt is not shared
    shared = make_micro_batches(samples, budget=64, packing=True)
    apart = make_micro_batches(samples, budget=64, packing=True, share_prompts=False)
    assert [e for mb in shared for e in mb.segments[0] if isinstance(e, tuple)] == [(9, (5, 3, 7, 4)), (6, (8, 2))]
    assert sum(mb.num_tokens for mb in apart) - sum(mb.num_tokens for mb in shared) == 3 * 9 + 6  # forwarded once
    with torch.no_grad():
        a = _by_sample(apart, [micro_batch_logprobs(model, mb)[0] for mb in apart])
        b = _by_sample(shared, [micro_batch_logprobs(model, mb)[0] for mb in shared])
    assert a.keys() == b.keys() == set(range(len(samples)))
    for s in a:
        torch.testing.assert_close(b[s], a[s], rtol=1e-5, atol=1e-6)
    ref_loss, ref_grads = _loss_and_grads(model, apart)
    loss, grads = _loss_and_grads(model, shared)
    assert abs(loss - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
    for name, g in grads.items():
        torch.testing.assert_close(g, ref_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_shared_prompt_keeps_a_sliding_window_and_a_group_over_the_budget_is_split():
    model = make_model(sliding_window=4).train()
    samples = _groups([7], [[6, 5, 6, 3]])
    shared = make_micro_batches(samples, budget=20, packing=True)  # 7 + 6 + 5 = 18; the rest in another unit
    assert [e for mb in shared for e in mb.segments[0] if isinstance(e, tuple)] == [(7, (6, 5)), (7, (6, 3))]
    apart = make_micro_batches(samples, budget=20, packing=True, share_prompts=False)
    with torch.no_grad():
        a = _by_sample(apart, [micro_batch_logprobs(model, mb)[0] for mb in apart])
        b = _by_sample(shared, [micro_batch_logprobs(model, mb)[0] for mb in shared])
    for s in a:
        torch.testing.assert_close(b[s], a[s], rtol=1e-5, atol=1e-6)
