"""Advantage estimators, policy loss, KL, aggregation, off-policy weights and filters against hand-computed values."""

import dataclasses
import math

import pytest
import torch

from temper.rl.advantages import RunningBaseline, group_indices, grpo, rloo
from temper.rl.batching import Sample, make_micro_batches
from temper.rl.config import FilterConfig
from temper.rl.critic import gae, value_loss
from temper.rl.filtering import FilterStats, filter_trajectories, overlong_penalty
from temper.rl.losses import clipped_policy_loss, kl_penalty, set_loss_weights, token_weights
from temper.rl.off_policy import importance_weights, mismatch_kl_sums
from temper.trajectory import Trajectory

approx = pytest.approx


def test_group_indices_keeps_order_and_singletons():
    assert group_indices(["a", "b", "a", "", "b"]) == [[0, 2], [1, 4], [3]]


def test_grpo_with_and_without_std():
    r = torch.tensor([1.0, 0.0, 0.0, 1.0, 2.0, 4.0])
    groups = [[0, 1, 2, 3], [4, 5]]
    # group 1: mean .5, unbiased std sqrt(1/3); group 2: mean 3, std sqrt(2)
    s = 0.5 / math.sqrt(1 / 3)
    assert grpo(r, groups, eps=0.0).tolist() == approx([s, -s, -s, s, -1 / math.sqrt(2), 1 / math.sqrt(2)], abs=1e-6)
    assert grpo(r, groups, std_normalize=False).tolist() == approx([0.5, -0.5, -0.5, 0.5, -1.0, 1.0])  # Dr. GRPO


def test_rloo_leave_one_out():
    r = torch.tensor([1.0, 0.0, 0.0, 0.0, 5.0])
    assert rloo(r, [[0, 1, 2, 3], [4]]).tolist() == approx([1.0, -1 / 3, -1 / 3, -1 / 3, 0.0])


def test_reinforce_running_baseline():
    b = RunningBaseline(decay=0.9)
    assert b(torch.tensor([1.0, 0.0])).tolist() == approx([0.5, -0.5])  # first baseline: the batch mean
    assert b(torch.tensor([1.0, 1.0])).tolist() == approx([0.5, 0.5])
    assert b.value == approx(0.9 * 0.5 + 0.1 * 1.0)


def test_gae_by_hand():
    adv, ret = gae(torch.tensor([0.0, 0.0, 1.0]), torch.tensor([0.5, 0.5, 0.5]), gamma=1.0, lam=0.5)
    assert adv.tolist() == approx([0.125, 0.25, 0.5])
    assert ret.tolist() == approx([0.625, 0.75, 1.0])
    adv, _ = gae(torch.tensor([0.0, 1.0]), torch.tensor([0.0, 0.0]), gamma=0.9, lam=1.0)
    assert adv.tolist() == approx([0.9, 1.0])


def test_clipped_policy_loss_clip_higher_and_dual_clip():
    ratio = torch.tensor([0.5, 1.5, 1.0, 4.0, 1.1])
    adv = torch.tensor([-1.0, 1.0, 1.0, -1.0, 1.0])
    logp = torch.log(ratio).requires_grad_(True)
    loss, st = clipped_policy_loss(logp, torch.zeros(5), adv, clip_low=0.2, clip_high=0.28, dual_clip=3.0)
    # 0.5 < 0.8 with A<0: clipped at 0.8; 1.5 > 1.28 with A>0: clipped at -1.28; 4 with A<0: dual cap 3
    assert loss.tolist() == approx([0.8, -1.28, -1.0, 3.0, -1.1])
    assert st["clipped_low"].tolist() == [True, False, False, False, False]
    assert st["clipped_high"].tolist() == [False, True, False, False, False]
    assert st["clipped_dual"].tolist() == [False, False, False, True, False]
    loss.sum().backward()
    # d/dlogp (-A r) = -A r where unclipped, 0 where a clip is active
    assert logp.grad.tolist() == approx([0.0, 0.0, -1.0, 0.0, -1.1])
    # 1.1 is inside [0.8, 1.28] but would be clipped by the symmetric 0.2 of plain PPO
    sym, st2 = clipped_policy_loss(torch.log(ratio), torch.zeros(5), adv, 0.2, 0.05, None)
    assert st2["clipped_high"][4] and sym[3] == approx(4.0)


def test_dual_clip_must_exceed_one():
    with pytest.raises(ValueError, match="dual_clip"):
        clipped_policy_loss(torch.zeros(1), torch.zeros(1), torch.ones(1), 0.2, 0.2, 0.5)


def test_kl_estimators():
    logp, ref = torch.tensor([0.0, math.log(0.5)]), torch.tensor([math.log(2.0), math.log(0.5)])
    assert kl_penalty(logp, ref, "k1").tolist() == approx([-math.log(2.0), 0.0])
    assert kl_penalty(logp, ref, "k3").tolist() == approx([2.0 - math.log(2.0) - 1.0, 0.0])


def test_value_loss_clipping():
    v, old, ret = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0]), torch.tensor([2.0, 1.0])
    # first: unclipped (1-2)^2 = 1, clipped to 0.2: (0.2-2)^2 = 3.24 -> max 3.24
    assert value_loss(v, old, ret, 0.2).tolist() == approx([0.5 * 3.24, 0.5])


def test_aggregations():
    per_token = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    lengths = [3, 2]

    def aggregate(mode, norm_length=None) -> float:
        w = torch.tensor(token_weights(lengths, mode, norm_length)).repeat_interleave(torch.tensor(lengths))
        return float((per_token * w).sum())

    assert token_weights(lengths, "seq_mean") == approx([1 / 6, 1 / 4])
    assert aggregate("token_mean") == approx(3.0)
    assert aggregate("seq_mean") == approx((2.0 + 4.5) / 2)
    assert aggregate("seq_sum_norm", norm_length=4) == approx(15 / 8)
    assert aggregate("seq_sum_norm") == approx(15 / 6)
    assert token_weights([0, 0], "token_mean") == [0.0, 0.0]


def test_loss_weights_span_micro_batches_and_skip_masked_tokens_and_fillers():
    samples = [Sample(torch.arange(4), torch.ones(4)), Sample(torch.arange(3), torch.ones(3))]  # 3 and 2 loss tokens
    mbs = make_micro_batches(samples, budget=4, packing=True)  # one sequence per micro-batch
    filler = dataclasses.replace(make_micro_batches(samples[:1], 4, True)[0], filler=True)
    mbs.append(filler)
    for mb in mbs:
        mb.values.keep = torch.full(mb.targets.shape, 0.0 if mb.filler else 1.0)
    set_loss_weights(mbs, 2, "seq_mean")
    assert [mb.values.weight.tolist() for mb in mbs] == [approx([1 / 6] * 3), approx([1 / 4] * 2), [0.0] * 3]
    mbs[0].values.keep[0] = 0.0  # masked (off-policy): sequence 0 now has 2 loss tokens
    set_loss_weights(mbs, 2, "token_mean")
    assert [mb.values.weight.tolist() for mb in mbs] == [[0.0, 0.25, 0.25], [0.25, 0.25], [0.0] * 3]


def test_truncated_importance_sampling_token_and_sequence():
    old = torch.zeros(3)
    behaviour = torch.log(torch.tensor([0.5, 2.0, 0.1]))  # ratios pi_old / mu = 2, 0.5, 10
    seq = torch.tensor([0, 0, 1])
    w, keep = importance_weights(old, behaviour, seq, 2, "token", cap=2.0, mask_high=5.0)
    assert w.tolist() == approx([2.0, 0.5, 2.0]) and keep.tolist() == [True, True, False]
    w, keep = importance_weights(old, behaviour, seq, 2, "sequence", cap=2.0, mask_low=0.9)
    assert w.tolist() == approx([1.0, 1.0, 2.0]) and keep.tolist() == [True, True, True]
    w, keep = importance_weights(old, behaviour, seq, 2, "none", mask_low=0.9)
    assert w.tolist() == [1.0, 1.0, 1.0] and keep.tolist() == [True, False, True]


def test_mismatch_kl():
    old = torch.zeros(3)
    behaviour = torch.log(torch.tensor([0.5, 2.0, 0.1]))
    k3 = [r - 1 - math.log(r) for r in (2.0, 0.5, 10.0)]
    k3_sum, k1_sum = mismatch_kl_sums(old, behaviour)
    assert k3_sum / 3 == approx(sum(k3) / 3)
    assert k1_sum / 3 == approx(float(behaviour.mean()))
    assert mismatch_kl_sums(old, old) == (0.0, 0.0)


def _t(reward, group, n_model=2, **kw):
    return Trajectory([1] * (2 + n_model), [0, 0] + [1] * n_model, [0.0] * (2 + n_model), [0] * (2 + n_model),
                      reward=reward, group_id=group, **kw)


def test_dynamic_sampling_drops_zero_variance_groups_and_failures():
    trajs = [_t(1, "a"), _t(1, "a"), _t(0, "b"), _t(0, "b"), _t(1, "c"), _t(0, "c"),
             _t(0, "c", failure="sandbox_crash")]
    f = filter_trajectories(trajs, FilterConfig())
    assert f.stats.dropped_groups == 2 and f.stats.dropped_failed == 1
    assert f.stats == FilterStats(dropped_failed=1, dropped_groups=2, masked_overlong=0, kept_trajectories=2)
    assert [t.group_id for t in f.trajectories] == ["c", "c"] and f.groups == [[0, 1]]
    kept_all = filter_trajectories(trajs, FilterConfig(drop_zero_variance=False))
    assert kept_all.stats.dropped_groups == 0 and len(kept_all.trajectories) == 6


def test_overlong_penalty_and_mask():
    assert [overlong_penalty(n, 10, 4) for n in (6, 8, 10, 11)] == approx([0.0, -0.5, -1.0, -1.0])
    trajs = [_t(1, "a", n_model=8), _t(1, "a", n_model=3)]
    f = filter_trajectories(trajs, FilterConfig(overlong="penalty", max_response_tokens=10, overlong_buffer=4))
    assert f.rewards == approx([0.5, 1.0])  # the shaped rewards differ, so the group is kept
    trajs = [_t(1, "a", truncated=True), _t(0, "a")]
    f = filter_trajectories(trajs, FilterConfig(overlong="mask"))
    assert f.train == [False, True] and f.stats.masked_overlong == 1


def test_warmup_then_cosine_schedule():
    from temper.rl.config import OptimConfig
    from temper.rl.optim import lr_factor

    cfg = OptimConfig(warmup_steps=4, total_steps=14, min_lr_ratio=0.1)
    assert [lr_factor(s, cfg) for s in range(4)] == approx([0.25, 0.5, 0.75, 1.0])
    assert lr_factor(9, cfg) == approx(0.1 + 0.9 * 0.5)  # halfway through the cosine
    assert lr_factor(14, cfg) == approx(0.1) and lr_factor(100, cfg) == approx(0.1)
