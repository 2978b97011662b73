"""The local backend driven directly (no pipeline): counters summed over workers, and weights
pushed while an episode is in flight, with partial rollouts on (one sample spans two policy
versions, each token tagged and carrying its behaviour logprob) and off (the update waits)."""

import asyncio
import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from temper.orchestrator.backends.local import LocalBackend
from temper.orchestrator.config import TrainConfig
from temper.orchestrator.rollout_worker import WorkerSpec, sum_counters
from temper.trajectory import Trajectory

SUITE = "toy:n=8,seed=0,digits=2"
TOKENS = 16  # per sample


def backend(model: Path, partial_rollouts: bool = True, num_workers: int = 1, max_new_tokens: int = 1) -> LocalBackend:
    from temper.engine import EngineConfig

    agent = {"system_prompt": "say", "temperature": 1.0, "max_turn_tokens": max_new_tokens, "turn_timeout_s": 120,
             "episode_timeout_s": 120}
    spec = WorkerSpec.of(TrainConfig.from_recipe({"agent": agent,
                                                     "orchestrator": {"partial_rollouts": partial_rollouts}}))
    return LocalBackend(str(model), EngineConfig(kv_budget_bytes=16_000_000, max_num_seqs=8), [SUITE], spec,
                        num_workers)


def task_ids(b: LocalBackend) -> list[str]:
    return list(b.workers[0].tasks[0])


def test_sum_counters_adds_keys_missing_from_some_workers() -> None:
    assert sum_counters([{"episodes": 2.0, "injected_x": 1.0}, {"episodes": 3.0}, {}]) == {
        "episodes": 5.0, "injected_x": 1.0}


def test_local_backend_counters_are_the_sum_over_its_workers(toy_model: Path) -> None:
    b = backend(toy_model, num_workers=2, max_new_tokens=3)
    try:
        async def run() -> None:
            tid = task_ids(b)[0]
            await asyncio.gather(b.run_episode(0, 0, tid, "g", 0), b.run_episode(1, 0, tid, "g", 1),
                                 b.run_episode(1, 0, tid, "g", 2))

        asyncio.run(run())
        per = [w.counters() for w in b.workers]
        assert [p["episodes"] for p in per] == [1.0, 2.0]
        total = b.counters()
        assert total["episodes"] == 3.0
        assert total["generated_tokens"] == per[0]["generated_tokens"] + per[1]["generated_tokens"] >= 3
    finally:
        b.close()


class NoEos:
    """A client in front of the engine that samples past the end token, so every sample runs its
    whole token budget (the random toy model would otherwise stop at a random length)."""

    def __init__(self, inner: Any):
        self.inner = inner

    async def generate(self, token_ids: list[int], params: Any) -> Any:
        return await self.inner.generate(token_ids, dataclasses.replace(params, ignore_eos=True))

    async def load_weights(self, state: Any, version: int) -> None:
        await self.inner.load_weights(state, version)


class PauseEngine:
    """Holds the engine's thread between two steps once it has run `after` of them, until released:
    weights pushed meanwhile land mid-sample at a known token, with no timing involved."""

    def __init__(self, engine: Any, after: int):
        self.after, self.steps, self._step = after, 0, engine.step
        self.paused, self.release = threading.Event(), threading.Event()
        engine.step = self.step

    def step(self) -> Any:
        out = self._step()
        self.steps += 1
        if self.steps == self.after:
            self.paused.set()
            self.release.wait(120)
        return out


def paused_backend(model: Path, partial_rollouts: bool) -> tuple[LocalBackend, PauseEngine]:
    b = backend(model, partial_rollouts, max_new_tokens=TOKENS)
    gate = b.workers[0].client  # GatedClient -> AsyncEngine
    pause = PauseEngine(gate.inner.engine, after=4)
    gate.inner = NoEos(gate.inner)
    return b, pause


def new_policy(model: Path) -> Any:
    """Version 1: the toy model with large random weights, a peaked policy far from version 0's."""
    from temper.models import load_model

    m = load_model(str(model)).model
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in m.parameters():  # tied embeddings appear once
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return m


def token_logprobs(model: Any, t: Trajectory) -> torch.Tensor:
    """log p(token_i | tokens before it) for every position (0 at the first), recomputed in full."""
    ids = torch.tensor(t.token_ids)
    with torch.no_grad():
        logp = torch.log_softmax(model.logits(ids[:-1]).float(), -1).gather(-1, ids[1:, None])[:, 0]
    return torch.cat([torch.zeros(1), logp])


def model_versions(t: Trajectory) -> list[int]:
    return [v for v, m in zip(t.versions, t.loss_mask, strict=True) if m]


def test_partial_rollout_spans_two_versions_and_is_corrected_per_token(toy_model: Path) -> None:
    from temper.models import load_model
    from temper.rl import RLConfig, Trainer

    b, pause = paused_backend(toy_model, partial_rollouts=True)
    v1 = new_policy(toy_model)
    state = {k: v.clone() for k, v in v1.state_dict().items()}

    async def run() -> Any:
        episode = asyncio.create_task(b.run_episode(0, 0, task_ids(b)[0], "g", 0))
        await asyncio.to_thread(pause.paused.wait, 120)
        await b.push_weights(state, 1)  # completes while the sample is held mid-flight: nothing waits
        pause.release.set()
        return await episode

    try:
        (t,) = asyncio.run(run()).trajectories
    finally:
        pause.release.set()
        b.close()
    versions = model_versions(t)
    assert len(versions) == TOKENS and versions == sorted(versions) and set(versions) == {0, 1}
    assert 0 < versions.count(0) <= 4  # sampled before the push (at most one token per step)
    assert t.min_version() == 0 and max(t.versions) == 1

    # Each token's behaviour logprob is from the policy that sampled it: version-0 tokens match a full
    # recompute under version 0 exactly; version-1 tokens do not (the new weights sampled them).
    mu = torch.tensor(t.logprobs)
    gen = torch.tensor(t.loss_mask, dtype=torch.bool)
    old = torch.tensor(t.versions) == 0
    v0_logp = token_logprobs(load_model(str(toy_model)).model, t)
    assert torch.allclose(mu[gen & old], v0_logp[gen & old], atol=1e-4)
    assert (mu[gen & ~old] - v0_logp[gen & ~old]).abs().max() > 0.1

    # The trainer, now at version 1, sees staleness 1 (the oldest token) and weighs every token by
    # pi_old / mu with that token's own behaviour logprob: its mismatch estimate is their mean gap.
    v1_logp = token_logprobs(v1, t)
    gap = float((mu - v1_logp)[gen].mean())
    assert abs(gap) > 0.05
    tok = load_model(str(toy_model)).tokenizer
    trainer = Trainer(v1, RLConfig(), pad_id=tok.pad_token_id)
    trainer.policy_version = 1
    a, c = (Trajectory.from_dict({**t.to_dict(), "reward": r, "id": f"g/{r}"}) for r in (1.0, 0.0))
    m = trainer.step([a, c]).as_metrics()
    assert m["staleness_max"] == 1.0 and "skipped" not in m
    assert m["mismatch_kl_k1"] == pytest.approx(gap, rel=1e-3, abs=1e-5)


def test_without_partial_rollouts_the_update_waits_and_no_sample_spans_two_versions(toy_model: Path) -> None:
    b, pause = paused_backend(toy_model, partial_rollouts=False)
    state = {k: v.clone() for k, v in new_policy(toy_model).state_dict().items()}
    gate, engine = b.workers[0].client, b.workers[0].client.inner.inner.engine

    async def run() -> tuple[Any, Any]:
        tid = task_ids(b)[0]
        first = asyncio.create_task(b.run_episode(0, 0, tid, "g", 0))
        await asyncio.to_thread(pause.paused.wait, 120)
        push = asyncio.create_task(b.push_weights(state, 1))
        while gate.open.is_set():  # the update closed the gate: new requests wait for it
            await asyncio.sleep(0.01)
        second = asyncio.create_task(b.run_episode(0, 0, tid, "g", 1))
        done, _ = await asyncio.wait({push, second}, timeout=1.0)
        assert not done and engine.version == 0  # held while the first sample is in flight
        pause.release.set()
        await push
        return await first, await second

    try:
        first, second = asyncio.run(run())
    finally:
        pause.release.set()
        b.close()
    assert model_versions(first.trajectories[0]) == [0] * TOKENS  # finished under the weights it began with
    assert model_versions(second.trajectories[0]) == [1] * TOKENS  # started only once the new weights were in
