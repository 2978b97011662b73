"""The trainer step: accumulation equivalence, masks, clipping, KL, off-policy metrics, estimators, LoRA."""

import dataclasses
import math

import pytest
import torch
from conftest import make_model, make_trajectories

from temper.rl import RLConfig, Trainer
from temper.rl.batching import make_micro_batches, trajectory_sample
from temper.rl.logprobs import micro_batch_logprobs
from temper.rl.lora import merged_state_dict
from temper.rl.optim import lr_factor
from temper.rl.trainer import bf16_autocast


def _cfg(**sections) -> RLConfig:
    cfg = RLConfig()
    cfg.optim.lr = 1e-2
    cfg.optim.warmup_steps = 0
    for dotted, value in sections.items():
        section, field = dotted.split("__")
        setattr(getattr(cfg, section), field, value)
    return cfg


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _assert_same(a, b, atol=1e-6):
    for n in a:
        torch.testing.assert_close(a[n], b[n], rtol=1e-5, atol=atol, msg=n)


def _by_hand(model, trajs) -> list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """Per trajectory, one at a time: the model's logprobs and entropies of its loss tokens, and their behaviour
    logprobs (what the trainer's no-grad pass and its first update see, before any weight changes)."""
    out = []
    for t in trajs:
        s = trajectory_sample(t, 0.0)
        (mb,) = make_micro_batches([s], 4096, True)
        with torch.no_grad():
            lp, ent = micro_batch_logprobs(model, mb)
        out.append((lp, ent, s.values["behaviour"][s.mask]))
    return out


def _token_mean(values) -> float:
    return float(torch.cat(values).mean())


def _first_update_loss(hand, advantages) -> float:
    """Token-mean loss at ratio 1: -A_t min(pi_old / mu, 2) per token (token-level truncated IS, cap 2)."""
    return _token_mean([-a * torch.exp(lp - mu).clamp(max=2.0) for (lp, _, mu), a in zip(hand, advantages,
                                                                                        strict=True)])


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "seq_sum_norm"])
def test_gradient_accumulation_equals_one_big_batch(aggregation):
    trajs = make_trajectories(obs=True)
    results = []
    for budget, packing in ((4096, True), (24, True), (40, False)):
        model = make_model()
        # Adam's first step is lr * g / (|g| + eps): with eps 1e-8 a gradient at rounding-noise level (~1e-9)
        # moves its weight by up to lr either way, so the summation order decides. eps 1e-4 keeps that step
        # linear in g, and the weights then compare the gradients themselves.
        tr = Trainer(model, _cfg(trainer__micro_batch_tokens=budget, trainer__packing=packing,
                                 loss__aggregation=aggregation, optim__eps=1e-4))
        m = tr.step(trajs).update
        results.append((m, _params(model)))
    (m_big, p_big), *others = results
    for m, p in others:
        assert m.loss == pytest.approx(m_big.loss, rel=1e-5, abs=1e-7)
        assert m.grad_norm == pytest.approx(m_big.grad_norm, rel=1e-4)
        _assert_same(p, p_big)
    assert p_big["model.embed_tokens.weight"].ne(make_model().model.embed_tokens.weight).any()  # it did update


def test_metrics_and_policy_version():
    trajs = make_trajectories()
    model = make_model()
    hand = _by_hand(model, trajs)
    tr = Trainer(model, _cfg())
    m = tr.step(trajs)
    # every group holds rewards 1, 0, 1, 0 (or 0, 1, 0, 1): GRPO gives +-a, a = 0.5 / (std + eps)
    a = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    advantages = [a if t.reward else -a for t in trajs]
    u = m.update
    assert (m.adv_mean, m.adv_min, m.adv_max) == (pytest.approx(0.0, abs=1e-7), pytest.approx(-a), pytest.approx(a))
    assert m.adv_std == pytest.approx(a * math.sqrt(12 / 11))  # unbiased std of 6 x a and 6 x -a
    assert m.reward_mean == 0.5 and m.staleness_mean == 0 and m.staleness_max == 0
    assert (m.filter.dropped_failed, m.filter.dropped_groups, m.filter.kept_trajectories) == (0, 0, 12)
    assert m.policy_version == 1 and tr.policy_version == 1 and tr.step_count == 1
    d = [lp - mu for lp, _, mu in hand]  # log(pi_old / mu)
    assert u.mismatch_kl == pytest.approx(_token_mean([torch.exp(x) - x - 1 for x in d]), rel=1e-5)
    assert u.mismatch_kl_k1 == pytest.approx(_token_mean([-x for x in d]), rel=1e-5)
    # every token was sampled at the trainer's version (staleness 0): all of them count
    assert u.mean_abs_logprob_mismatch == pytest.approx(_token_mean([x.abs() for x in d]), rel=1e-5)
    assert u.is_masked_frac == 0.0 and u.kl == 0.0 and u.value_loss is None
    assert u.clip_frac_low == u.clip_frac_high == u.clip_frac_dual == 0.0  # ratio 1 on the first update
    assert u.entropy == pytest.approx(_token_mean([ent for _, ent, _ in hand]), rel=1e-5)
    assert u.entropy > 1.0 and u.grad_norm > 0 and u.tokens_per_s > 0
    assert u.loss == pytest.approx(_first_update_loss(hand, advantages), rel=1e-4, abs=1e-6)
    assert u.tokens == sum(len(t.token_ids) for t in trajs)
    assert u.lr == pytest.approx(1e-2 * lr_factor(1, tr.cfg.optim))
    assert set(m.as_metrics()) == {
        "loss", "grad_norm", "clip_frac_low", "clip_frac_high", "clip_frac_dual", "kl", "entropy", "adv_mean",
        "adv_std", "adv_min", "adv_max", "reward_mean", "tokens", "tokens_per_s", "mismatch_kl", "mismatch_kl_k1",
        "is_masked_frac", "mean_abs_logprob_mismatch", "dropped_groups", "dropped_failed", "masked_overlong",
        "kept_trajectories", "staleness_mean", "staleness_max", "truncated", "truncated_tokens", "context_split",
        "lr", "lr_scale",
        "policy_version"}  # the trainer/<key> columns of metrics.jsonl
    assert m.as_metrics()["loss"] == u.loss and m.as_metrics()["policy_version"] == 1.0


def test_the_logprob_mismatch_counts_only_tokens_of_the_current_version():
    trajs = make_trajectories()
    tr = Trainer(make_model(), _cfg())
    assert tr.step(trajs).update.mean_abs_logprob_mismatch > 0  # version 0 tokens, trainer at 0
    stale = tr.step(trajs).update  # the same version-0 tokens, now one version behind the trainer
    assert stale.mean_abs_logprob_mismatch is None and stale.mismatch_kl > 0


def test_only_model_tokens_and_healthy_episodes_carry_loss():
    trajs = make_trajectories(obs=True)
    n_model = sum(t.num_model_tokens for t in trajs)
    m = Trainer(make_model(), _cfg()).step(trajs)
    assert m.update.tokens == sum(len(t.token_ids) for t in trajs)
    # changing observation tokens' recorded logprobs, or adding a crashed episode, changes nothing
    changed = [dataclasses.replace(t, logprobs=[lp if mk else -9.0
                                                for lp, mk in zip(t.logprobs, t.loss_mask, strict=True)])
               for t in trajs]
    crashed = dataclasses.replace(trajs[0], failure="sandbox_crash", reward=-100.0, id="crash")
    a, b = make_model(), make_model()
    ma = Trainer(a, _cfg()).step(trajs)
    mb = Trainer(b, _cfg()).step([*changed, crashed])
    assert mb.filter.dropped_failed == 1 and ma.update.loss == pytest.approx(mb.update.loss, abs=1e-7)
    _assert_same(_params(a), _params(b))
    assert n_model > 0


def test_dynamic_sampling_reported_and_all_dropped_skips_the_update():
    trajs = make_trajectories()
    for t in trajs:
        if t.group_id == "g0":
            t.reward = 1.0
    model = make_model()
    m = Trainer(model, _cfg()).step(trajs)
    assert m.filter.dropped_groups == 1 and m.filter.kept_trajectories == 8
    for t in trajs:
        t.reward = 0.0
    before = _params(model)
    tr = Trainer(model, _cfg())
    m = tr.step(trajs)
    assert m.skipped and m.filter.dropped_groups == 3 and tr.policy_version == 0
    assert m.as_metrics() == {"reward_mean": 0.0, "dropped_failed": 0.0, "dropped_groups": 3.0, "masked_overlong": 0.0,
                              "kept_trajectories": 0.0, "staleness_mean": 0.0, "staleness_max": 0.0, "skipped": 1.0,
                              "truncated": 0.0, "truncated_tokens": 0.0, "context_split": 0.0, "policy_version": 0.0}
    _assert_same(before, _params(model), atol=0)


def test_stale_behaviour_logprobs_are_clipped_and_reported():
    """With pi_old = mu (no recompute) and mu far from pi, the PPO clip must engage on both sides."""
    model = make_model()
    trajs = make_trajectories(groups=4)
    # make mu = pi +- 1 nat: ratio e^{-1} or e^{+1}
    for t in trajs:
        (mb,) = make_micro_batches([trajectory_sample(t, 0.0)], 4096, True)
        with torch.no_grad():
            lp, _ = micro_batch_logprobs(model, mb)
        shift = 1.0 if t.reward > 0 else -1.0
        it = iter(lp.tolist())
        t.logprobs = [next(it) + shift if (m and i > 0) else 0.0 for i, m in enumerate(t.loss_mask)]
    cfg = _cfg(off_policy__recompute_logprobs=False)
    m = Trainer(model, cfg).step(trajs)
    # reward 1 (A>0) has ratio e^-1: inside on the high side; reward 0 (A<0) has ratio e: dual clip at 3? no, e<3
    assert m.update.clip_frac_low == 0.0 and m.update.clip_frac_high == 0.0
    for t in trajs:
        shift = -1.0 if t.reward > 0 else 1.0  # A>0 with ratio e (> 1.28), A<0 with ratio e^-1 (< 0.8)
        t.logprobs = [lp + 2 * shift if m_ else lp for lp, m_ in zip(t.logprobs, t.loss_mask, strict=True)]
    m = Trainer(make_model(), cfg).step(trajs)
    assert m.update.clip_frac_high > 0.3 and m.update.clip_frac_low > 0.3
    # every token is clipped: those of reward 1 on the high side, those of reward 0 on the low side
    positive = sum(t.num_model_tokens for t in trajs if t.reward > 0) / sum(t.num_model_tokens for t in trajs)
    assert m.update.clip_frac_high == pytest.approx(positive) and m.update.clip_frac_low == pytest.approx(1 - positive)


def test_mismatch_kl_and_masking_with_recompute():
    model = make_model()
    trajs = make_trajectories()
    cfg = _cfg(off_policy__mask_high=1.5, off_policy__tis="token")
    d = [lp - mu for lp, _, mu in _by_hand(model, trajs)]  # log(pi_old / mu)
    m = Trainer(model, cfg).step(trajs).update
    # behaviour logprobs are random in [-5, -3] while the model's are ~ -log 64: a large, reported mismatch
    assert m.mismatch_kl > 0.05
    assert 0.0 < m.is_masked_frac < 1.0
    assert m.mismatch_kl == pytest.approx(_token_mean([torch.exp(x) - x - 1 for x in d]), rel=1e-5)
    assert m.is_masked_frac == pytest.approx(_token_mean([(torch.exp(x) > 1.5).float() for x in d]))


def test_kl_to_reference_and_entropy_bonus():
    model, ref = make_model(), make_model()
    cfg = _cfg(loss__kl_coef=0.1, trainer__mini_batches=2, loss__entropy_coef=0.01)
    m = Trainer(model, cfg, ref_model=ref).step(make_trajectories(groups=4))
    assert m.update.kl > 0  # the second mini-batch sees a policy one update away from the reference
    # one update against another model: the k3 KL the loss sees is that of the weights before the update
    trajs, model, ref = make_trajectories(), make_model(), make_model(seed=1)
    kl = [torch.exp(r - lp) - (r - lp) - 1 for (lp, _, _), (r, _, _) in
          zip(_by_hand(model, trajs), _by_hand(ref, trajs), strict=True)]
    m = Trainer(model, _cfg(loss__kl_coef=0.1), ref_model=ref).step(trajs)
    assert m.update.kl == pytest.approx(_token_mean(kl), rel=1e-5)
    # no reference given: the starting weights, frozen (temper train's kl_coef uses this)
    model = make_model()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    t = Trainer(model, _cfg(loss__kl_coef=0.1, trainer__mini_batches=2))
    m = t.step(make_trajectories(groups=4))
    assert m.update.kl > 0
    assert all(torch.equal(v, start[k]) for k, v in t.ref_model.state_dict().items())
    assert any(not torch.equal(v, start[k]) for k, v in t.model.state_dict().items())


@pytest.mark.parametrize("estimator", ["dr_grpo", "rloo", "reinforce", "gae"])
def test_every_estimator_trains(estimator):
    model = make_model()
    before = _params(model)
    trajs = make_trajectories(obs=True)
    hand = _by_hand(model, trajs)
    tr = Trainer(model, _cfg(advantages__estimator=estimator))
    m = tr.step(trajs).update
    assert m.grad_norm > 0 and math.isfinite(m.loss)
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    # every group holds rewards 1, 0, 1, 0 (or 0, 1, 0, 1); REINFORCE's first baseline is the batch mean 0.5
    outcome = {"dr_grpo": 0.5, "rloo": 1 - 1 / 3, "reinforce": 0.5}
    if estimator != "gae":
        a = outcome[estimator]
        assert m.loss == pytest.approx(_first_update_loss(hand, [a if t.reward else -a for t in trajs]), abs=1e-6)
        assert m.value_loss is None and tr.critic is None
        return
    # the value head starts at 0: A_t = R_t = r lam^(n - 1 - t) (gamma 1, lam 0.95), value loss 0.5 R_t^2
    returns = [t.reward * 0.95 ** torch.arange(t.num_model_tokens - 1, -1, -1.0) for t in trajs]
    assert tr.critic is not None
    assert m.value_loss == pytest.approx(_token_mean([0.5 * r**2 for r in returns]), rel=1e-5)
    assert m.loss == pytest.approx(_first_update_loss(hand, returns) + 0.5 * m.value_loss, abs=1e-6)


def test_lora_trains_adapters_only_and_merges():
    model = make_model()
    base = _params(model)
    cfg = _cfg()
    cfg.trainer.lora.enabled = True
    tr = Trainer(model, cfg)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    torch.testing.assert_close(tr.policy_state_dict()["model.layers.0.self_attn.q_proj.weight"],
                               base["model.layers.0.self_attn.q_proj.weight"])
    tr.step(make_trajectories())
    merged = tr.policy_state_dict()
    assert set(merged) == set(make_model().state_dict())
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(merged[q], base[q])
    plain = make_model()
    plain.load_state_dict(merged)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    with torch.no_grad():
        torch.testing.assert_close(plain.logits(ids), model.logits(ids), rtol=1e-4, atol=1e-5)
    assert merged_state_dict(model).keys() == merged.keys()


def test_bf16_autocast_option_runs_close_to_fp32():
    trajs = make_trajectories()
    m32 = Trainer(make_model(), _cfg()).step(trajs)
    m16 = Trainer(make_model(), _cfg(trainer__dtype="bfloat16")).step(trajs)
    assert m16.update.loss == pytest.approx(m32.update.loss, abs=0.05)
    model = make_model()
    Trainer(model, _cfg(trainer__dtype="bfloat16")).step(trajs)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master weights


def test_the_default_dtype_is_bf16_on_cuda_and_fp32_on_the_cpu():
    assert bf16_autocast("auto", torch.device("cuda")) and bf16_autocast("auto", torch.device("cuda", 1))
    assert not bf16_autocast("auto", torch.device("cpu")) and not bf16_autocast("float32", torch.device("cuda"))
    assert bf16_autocast("bfloat16", torch.device("cpu"))
    trajs = make_trajectories()
    auto = Trainer(make_model(), _cfg()).step(trajs).update.loss
    assert auto == Trainer(make_model(), _cfg(trainer__dtype="float32")).step(trajs).update.loss
    assert auto != Trainer(make_model(), _cfg(trainer__dtype="bfloat16")).step(trajs).update.loss


def test_gae_without_recompute_and_gradient_checkpointing():
    trajs = make_trajectories(obs=True)
    m = Trainer(make_model(), _cfg(advantages__estimator="gae", off_policy__recompute_logprobs=False)).step(trajs)
    assert m.update.value_loss > 0
    returns = [t.reward * 0.95 ** torch.arange(t.num_model_tokens - 1, -1, -1.0) for t in trajs]
    assert m.update.value_loss == pytest.approx(_token_mean([0.5 * r**2 for r in returns]), rel=1e-5)
    a, b = make_model(), make_model()
    ma = Trainer(a, _cfg()).step(make_trajectories())
    mb = Trainer(b, _cfg(trainer__gradient_checkpointing=True)).step(make_trajectories())
    assert ma.update.loss == pytest.approx(mb.update.loss, abs=1e-6)
    _assert_same(_params(a), _params(b))


def test_reinforce_learns_from_ungrouped_trajectories_and_staleness_is_reported():
    trajs = make_trajectories()
    for t in trajs:
        t.group_id = ""
    tr = Trainer(make_model(), _cfg(advantages__estimator="reinforce"))
    tr.policy_version = 2  # the trajectories were sampled by version 0
    m = tr.step(trajs)
    assert m.filter.dropped_groups == 0 and not m.skipped and m.update.grad_norm > 0
    assert m.staleness_max == 2 and m.staleness_mean == 2
    m = Trainer(make_model(), _cfg()).step(trajs)  # GRPO: a group of one has nothing to compare with
    assert m.skipped and m.filter.dropped_groups == len(trajs)


@pytest.mark.parametrize("version", [1, 3])
def test_a_staleness_aware_lr_divides_the_step_by_the_samples_mean_staleness(version):
    """optim.staleness_lr: inverse. Adam's first step has the same direction whatever the lr, so the weights move
    by exactly 1/staleness of the plain step's distance (staleness 1 and below: unchanged); the next step's lr is
    the schedule's again."""
    moved = {}
    for rule in ("none", "inverse"):
        tr = Trainer(make_model(), _cfg(optim__staleness_lr=rule))
        tr.policy_version = version  # the trajectories were sampled by version 0: staleness `version`
        before = _params(tr.model)
        m = tr.step(make_trajectories())
        moved[rule] = {n: p.detach() - before[n] for n, p in tr.model.named_parameters()}
        assert m.staleness_mean == version and m.update.lr_scale == (None if rule == "none" else 1 / version)
        assert tr.optimizer.param_groups[0]["lr"] == pytest.approx(1e-2 * lr_factor(1, tr.cfg.optim))
    assert max(float(d.abs().max()) for d in moved["none"].values()) > 1e-3
    _assert_same({n: d / version for n, d in moved["none"].items()}, moved["inverse"], atol=1e-6)


def test_trainer_recomputes_the_engines_temperature_scaled_logprobs():
    """Rollouts sampled at T=0.7 record log softmax(logits / 0.7); the trainer matches them (no
    mismatch at staleness 0) only when it divides by the same temperature."""
    import copy

    from temper.engine import EngineConfig, LLMEngine
    from temper.generation import SamplingParams
    from temper.trajectory import Trajectory

    model = make_model()
    engine = LLMEngine(copy.deepcopy(model), None, EngineConfig(kv_budget_bytes=8 * 2**20, block_size=16))
    prompt = [3, 5, 7, 9]
    outs = engine.generate([prompt], SamplingParams(temperature=0.7, n=4, seed=0, max_tokens=6, ignore_eos=True))
    trajs = [Trajectory(token_ids=prompt + o.token_ids, loss_mask=[0] * 4 + [1] * 6, logprobs=[0.0] * 4 + o.logprobs,
                        versions=[-1] * 4 + o.versions, reward=float(i % 2), group_id="g") for i, o in enumerate(outs)]
    mismatch = {}
    for temperature in (0.7, 1.0):
        trainer = Trainer(copy.deepcopy(model), _cfg(optim__lr=0.0), temperature=temperature)
        mismatch[temperature] = trainer.step(trajs).update.mismatch_kl_k1
    assert abs(mismatch[0.7]) < 1e-5
    assert abs(mismatch[1.0]) > 1e-3  # at T=1 the trainer would correct a mismatch that is not there


@pytest.mark.parametrize("micro_batch_tokens", [4096, 24])  # one micro-batch, and several
def test_pi_old_from_the_updates_own_forward_equals_a_pass_of_its_own(micro_batch_tokens):
    """With one mini-batch the update's forward is on the weights pi_old is defined by: folding the no-grad pass
    into it gives the same weights and the same off-policy statistics, with one forward per micro-batch, not two."""
    trajs = make_trajectories(groups=4, obs=True)
    for t in trajs[::3]:  # some tokens from the current version: the staleness-0 mismatch is reported too
        t.versions = [0 if m else -1 for m in t.loss_mask]
    runs = {}
    for fold in (False, True):
        model = make_model()
        forwards = []
        model.register_forward_hook(lambda *_, seen=forwards: seen.append(1))
        trainer = Trainer(model, _cfg(trainer__micro_batch_tokens=micro_batch_tokens,
                                      trainer__fold_old_logprobs=fold))
        assert trainer.folds_old_logprobs() is fold
        stats = [trainer.step(trajs).update for _ in range(2)]
        runs[fold] = (_params(model), stats, len(forwards))
    (p0, s0, n0), (p1, s1, n1) = runs[False], runs[True]
    _assert_same(p0, p1)
    assert n1 * 2 == n0 and n1 >= 2 * (1 if micro_batch_tokens == 4096 else 3)  # the pass that folding saves
    for a, b in zip(s0, s1, strict=True):
        for key in ("loss", "mismatch_kl", "is_masked_frac", "clip_frac_high", "clip_frac_low", "entropy", "grad_norm"):
            assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-5, abs=1e-7), key
    assert s1[0].mismatch_kl > 0.05  # the weights came from the behaviour logprobs, not from pi_old = pi


def test_pi_old_has_a_pass_of_its_own_where_folding_would_change_the_step():
    for over in ({"trainer__mini_batches": 2}, {"off_policy__mask_high": 1.5}, {"advantages__estimator": "gae"},
                 {"off_policy__recompute_logprobs": False}):
        assert not Trainer(make_model(), _cfg(**over)).folds_old_logprobs(), over


def test_a_step_with_shared_prompts_equals_one_without_for_fewer_tokens_forwarded():
    trajs = make_trajectories(groups=3, per_group=4, obs=True)
    for t in trajs:  # a group's samples start with the same prompt, as a GRPO group's do
        first = next(u for u in trajs if u.group_id == t.group_id)
        p, q = first.loss_mask.index(1), t.loss_mask.index(1)
        t.token_ids = first.token_ids[:p] + t.token_ids[q:]
        t.loss_mask, t.logprobs = first.loss_mask[:p] + t.loss_mask[q:], first.logprobs[:p] + t.logprobs[q:]
        t.versions = first.versions[:p] + t.versions[q:]
    runs = {}
    for share in (False, True):
        model = make_model()
        stats = Trainer(model, _cfg(trainer__share_prompts=share)).step(trajs).update
        runs[share] = (_params(model), {n: p.grad.clone() for n, p in model.named_parameters()}, stats)
    (p0, g0, a), (p1, g1, b) = runs[False], runs[True]
    for name, g in g1.items():  # the same gradients, summed in another order
        torch.testing.assert_close(g, g0[name], rtol=1e-4, atol=1e-8, msg=name)
    _assert_same(p0, p1, atol=1e-5)  # Adam scales a near-zero gradient's rounding up to lr-sized steps
    assert b.loss == pytest.approx(a.loss, rel=1e-5, abs=1e-7) and b.mismatch_kl == pytest.approx(a.mismatch_kl)
    prompts = {t.group_id: t.loss_mask.index(1) for t in trajs}  # each forwarded once, not once per sample
    assert a.tokens - b.tokens == sum((4 - 1) * p for p in prompts.values() if p >= 2) > 0
    # under bf16 autocast too (the shared prompt's rests attend in bf16)
    bf16 = Trainer(make_model(), _cfg(trainer__share_prompts=True, trainer__dtype="bfloat16")).step(trajs).update
    assert bf16.tokens == b.tokens and bf16.loss == pytest.approx(b.loss, abs=0.05)
