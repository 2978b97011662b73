"""A tiny model learns a verifiable task with GRPO, sampling its rollouts from the engine.

Task: after the prompt `a + b =` (digits 0..4, one token each) emit the token of the sum. The
policy starts random (well under 30% greedy accuracy), trains on engine rollouts (token ids,
behaviour logprobs and versions exactly as the engine records them), syncs its weights into the
engine after every step, and must end above 90% greedy accuracy on all 25 problems.
"""

import copy

import pytest
import torch

from temper.engine import EngineConfig, LLMEngine
from temper.generation import SamplingParams
from temper.models import LlamaForCausalLM, ModelConfig
from temper.rl import RLConfig, Trainer
from temper.trajectory import Trajectory

DIGITS, PLUS, EQ, EOS, ANSWER = 5, 10, 11, 12, 13  # answer token = ANSWER + a + b
PROBLEMS = [(a, b) for a in range(DIGITS) for b in range(DIGITS)]


def _prompt(a: int, b: int) -> list[int]:
    return [a, PLUS, b, EQ]


def _greedy_accuracy(engine: LLMEngine) -> float:
    outs = engine.generate([_prompt(a, b) for a, b in PROBLEMS], SamplingParams(temperature=0.0, max_tokens=1))
    return sum(o.token_ids[0] == ANSWER + a + b for o, (a, b) in zip(outs, PROBLEMS, strict=True)) / len(PROBLEMS)


@pytest.mark.slow
@pytest.mark.e2e
def test_grpo_learns_digit_sums_with_engine_rollouts():
    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=ANSWER + 2 * DIGITS - 1, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64,
                      eos_token_id=EOS, bos_token_id=None)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0, 0.02)
    engine = LLMEngine(copy.deepcopy(model), None, EngineConfig(kv_budget_bytes=32 * 2**20, block_size=16, seed=0))
    rl = RLConfig()
    rl.optim.lr = 3e-3
    rl.optim.min_lr_ratio = 1.0
    rl.loss.entropy_coef = 0.01  # keeps some exploration: a confidently wrong answer gets no GRPO signal
    trainer = Trainer(model, rl)
    start = _greedy_accuracy(engine)
    assert start < 0.3

    history = []
    for _ in range(STEPS):
        problems = PROBLEMS  # every problem, N samples each, every step
        outs = engine.generate([_prompt(a, b) for a, b in problems],
                               SamplingParams(temperature=1.0, n=N, max_tokens=1, ignore_eos=True))
        trajectories = []
        for i, o in enumerate(outs):
            a, b = problems[i // N]
            trajectories.append(Trajectory(
                token_ids=o.prompt_token_ids + o.token_ids, loss_mask=[0] * 4 + [1] * len(o.token_ids),
                logprobs=[0.0] * 4 + o.logprobs, versions=[-1] * 4 + o.versions,
                reward=float(o.token_ids[0] == ANSWER + a + b), group_id=f"{len(history)}-{i // N}"))
        metrics = trainer.step(trajectories).as_metrics()
        engine.load_weights(trainer.policy_state_dict(), trainer.policy_version)
        history.append(metrics)
        assert metrics.get("mismatch_kl", 0.0) < 1e-3  # engine and trainer compute the same logprobs

    final = _greedy_accuracy(engine)
    curve = " ".join(f"{m['reward_mean']:.2f}" for m in history)
    assert final > 0.9, f"greedy accuracy {start:.2f} -> {final:.2f}; sampled reward per step: {curve}"
    assert engine.version == trainer.policy_version == STEPS - sum(m.get("skipped", 0) for m in history)
    assert sum(m["dropped_groups"] for m in history) > 0  # dynamic sampling was active


STEPS, N = 60, 16  # optimizer steps; samples per problem (one GRPO group)
