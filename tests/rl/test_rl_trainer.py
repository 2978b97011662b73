"""The trainer step: accumulation equivalence, masks, clipping, KL, off-policy metrics, estimators, LoRA."""

import dataclasses

import pytest
import torch
from conftest import make_model, make_trajectories

from temper.rl import RLConfig, Trainer
from temper.rl.logprobs import micro_batch_logprobs
from temper.rl.lora import merged_state_dict


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


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean", "seq_sum_norm"])
def test_gradient_accumulation_equals_one_big_batch(aggregation):
    trajs = make_trajectories(obs=True)
    results = []
    for budget, packing in ((4096, True), (24, True), (40, False)):
        model = make_model()
        tr = Trainer(model, _cfg(trainer__micro_batch_tokens=budget, trainer__packing=packing,
                                 loss__aggregation=aggregation))
        m = tr.step(trajs)
        results.append((m, _params(model)))
    (m_big, p_big), *others = results
    for m, p in others:
        assert m["loss"] == pytest.approx(m_big["loss"], rel=1e-5, abs=1e-7)
        assert m["grad_norm"] == pytest.approx(m_big["grad_norm"], rel=1e-4)
        _assert_same(p, p_big)
    assert p_big["model.embed_tokens.weight"].ne(make_model().model.embed_tokens.weight).any()  # it did update


def test_metrics_and_policy_version():
    tr = Trainer(make_model(), _cfg())
    m = tr.step(make_trajectories())
    for key in ("loss", "clip_frac_low", "clip_frac_high", "kl", "entropy", "grad_norm", "adv_mean", "adv_std",
                "tokens_per_s", "mismatch_kl", "dropped_groups", "lr"):
        assert key in m, key
    assert m["policy_version"] == 1 and tr.policy_version == 1 and tr.step_count == 1
    assert m["entropy"] > 1.0 and m["grad_norm"] > 0 and m["tokens_per_s"] > 0


def test_only_model_tokens_and_healthy_episodes_carry_loss():
    trajs = make_trajectories(obs=True)
    n_model = sum(t.num_model_tokens for t in trajs)
    m = Trainer(make_model(), _cfg()).step(trajs)
    assert m["tokens"] == sum(len(t.token_ids) for t in trajs)
    # changing observation tokens' recorded logprobs, or adding a crashed episode, changes nothing
    changed = [dataclasses.replace(t, logprobs=[lp if mk else -9.0
                                                for lp, mk in zip(t.logprobs, t.loss_mask, strict=True)])
               for t in trajs]
    crashed = dataclasses.replace(trajs[0], failure="sandbox_crash", reward=-100.0, id="crash")
    a, b = make_model(), make_model()
    ma = Trainer(a, _cfg()).step(trajs)
    mb = Trainer(b, _cfg()).step([*changed, crashed])
    assert mb["dropped_failed"] == 1 and ma["loss"] == pytest.approx(mb["loss"], abs=1e-7)
    _assert_same(_params(a), _params(b))
    assert n_model > 0


def test_dynamic_sampling_reported_and_all_dropped_skips_the_update():
    trajs = make_trajectories()
    for t in trajs:
        if t.group_id == "g0":
            t.reward = 1.0
    model = make_model()
    m = Trainer(model, _cfg()).step(trajs)
    assert m["dropped_groups"] == 1 and m["kept_trajectories"] == 8
    for t in trajs:
        t.reward = 0.0
    before = _params(model)
    tr = Trainer(model, _cfg())
    m = tr.step(trajs)
    assert m["skipped"] == 1 and m["dropped_groups"] == 3 and tr.policy_version == 0
    _assert_same(before, _params(model), atol=0)


def test_stale_behaviour_logprobs_are_clipped_and_reported():
    """With pi_old = mu (no recompute) and mu far from pi, the PPO clip must engage on both sides."""
    model = make_model()
    trajs = make_trajectories(groups=4)
    # make mu = pi +- 1 nat: ratio e^{-1} or e^{+1}
    from temper.rl.batching import make_micro_batches, trajectory_sample

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
    assert m["clip_frac_low"] == 0.0 and m["clip_frac_high"] == 0.0
    for t in trajs:
        shift = -1.0 if t.reward > 0 else 1.0  # A>0 with ratio e (> 1.28), A<0 with ratio e^-1 (< 0.8)
        t.logprobs = [lp + 2 * shift if m_ else lp for lp, m_ in zip(t.logprobs, t.loss_mask, strict=True)]
    m = Trainer(make_model(), cfg).step(trajs)
    assert m["clip_frac_high"] > 0.3 and m["clip_frac_low"] > 0.3


def test_mismatch_kl_and_masking_with_recompute():
    model = make_model()
    trajs = make_trajectories()
    cfg = _cfg(off_policy__mask_high=1.5, off_policy__tis="token")
    m = Trainer(model, cfg).step(trajs)
    # behaviour logprobs are random in [-5, -3] while the model's are ~ -log 64: a large, reported mismatch
    assert m["mismatch_kl"] > 0.05
    assert 0.0 < m["is_masked_frac"] < 1.0


def test_kl_to_reference_and_entropy_bonus():
    model, ref = make_model(), make_model()
    cfg = _cfg(loss__kl_coef=0.1, trainer__mini_batches=2, loss__entropy_coef=0.01)
    m = Trainer(model, cfg, ref_model=ref).step(make_trajectories(groups=4))
    assert m["kl"] > 0  # the second mini-batch sees a policy one update away from the reference
    with pytest.raises(ValueError, match="reference model"):
        Trainer(make_model(), _cfg(loss__kl_coef=0.1))


@pytest.mark.parametrize("estimator", ["dr_grpo", "rloo", "reinforce", "gae"])
def test_every_estimator_trains(estimator):
    model = make_model()
    before = _params(model)
    tr = Trainer(model, _cfg(advantages__estimator=estimator))
    m = tr.step(make_trajectories(obs=True))
    assert m["grad_norm"] > 0 and torch.isfinite(torch.tensor(m["loss"]))
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())
    if estimator == "gae":
        assert "value_loss" in m and tr.value_head is not None


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
    assert m16["loss"] == pytest.approx(m32["loss"], abs=0.05)
    model = make_model()
    Trainer(model, _cfg(trainer__dtype="bfloat16")).step(trajs)
    assert all(p.dtype == torch.float32 for p in model.parameters())  # fp32 master weights


def test_gae_without_recompute_and_gradient_checkpointing():
    m = Trainer(make_model(), _cfg(advantages__estimator="gae", off_policy__recompute_logprobs=False)).step(
        make_trajectories(obs=True))
    assert m["value_loss"] > 0
    a, b = make_model(), make_model()
    ma = Trainer(a, _cfg()).step(make_trajectories())
    mb = Trainer(b, _cfg(trainer__gradient_checkpointing=True)).step(make_trajectories())
    assert ma["loss"] == pytest.approx(mb["loss"], abs=1e-6)
    _assert_same(_params(a), _params(b))


def test_reinforce_learns_from_ungrouped_trajectories_and_staleness_is_reported():
    trajs = make_trajectories()
    for t in trajs:
        t.group_id = ""
    tr = Trainer(make_model(), _cfg(advantages__estimator="reinforce"))
    tr.policy_version = 2  # the trajectories were sampled by version 0
    m = tr.step(trajs)
    assert m["dropped_groups"] == 0 and "skipped" not in m and m["grad_norm"] > 0
    assert m["staleness_max"] == 2 and m["staleness_mean"] == 2
    m = Trainer(make_model(), _cfg()).step(trajs)  # GRPO: a group of one has nothing to compare with
    assert m["skipped"] == 1 and m["dropped_groups"] == len(trajs)


def test_trainer_recomputes_the_engines_temperature_scaled_logprobs():
    """Rollouts sampled at T=0.7 record log softmax(logits / 0.7); the trainer matches them (no
    mismatch at staleness 0) only when it divides by the same temperature."""
    import copy

    from temper.engine import EngineConfig, LLMEngine, SamplingParams
    from temper.trajectory import Trajectory

    model = make_model()
    engine = LLMEngine(copy.deepcopy(model), None, EngineConfig(kv_budget_bytes=8 * 2**20, block_size=16))
    prompt = [3, 5, 7, 9]
    outs = engine.generate([prompt], SamplingParams(temperature=0.7, n=4, seed=0, max_tokens=6, ignore_eos=True))
    trajs = [Trajectory(token_ids=prompt + o.token_ids, loss_mask=[0] * 4 + [1] * 6, logprobs=[0.0] * 4 + o.logprobs,
                        versions=[-1] * 4 + o.versions, reward=float(i % 2), group_id="g") for i, o in enumerate(outs)]
    mismatch = {}
    for temperature in (0.7, 1.0):
        cfg = _cfg(optim__lr=0.0)
        cfg.temperature = temperature
        mismatch[temperature] = Trainer(copy.deepcopy(model), cfg).step(trajs)["mismatch_kl_k1"]
    assert abs(mismatch[0.7]) < 1e-5
    assert abs(mismatch[1.0]) > 1e-3  # at T=1 the trainer would correct a mismatch that is not there
