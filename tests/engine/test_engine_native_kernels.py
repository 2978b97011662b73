"""The engine on temper's C++ kernels (`EngineConfig.native_kernels`, temper/native: decode attention and
the small GEMM) gives the tokens of its torch ops (cascade groups, solo rows, mixed steps, preemption,
speculation, weight loads), with proof that they ran; where a kernel does not apply, torch ops run."""

import copy

import pytest
import torch
from engine_helpers import random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.generation import SamplingParams


def pair(**kw) -> tuple[LLMEngine, LLMEngine]:
    model = tiny_pair(seed=3)[0]
    return tuple(LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, native_kernels=choice, **kw))
                 for choice in ("on", "off"))


def same(a, b) -> None:
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    torch.testing.assert_close(torch.tensor([x for c in a for x in c.logprobs]),
                               torch.tensor([x for c in b for x in c.logprobs]), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kw", [{}, {"max_num_batched_tokens": 40}, {"kv_budget_bytes": 120_000},
                                {"cascade_prefix_bytes": 0}], ids=["default", "mixed-steps", "preempted", "regather"])
def test_the_engine_samples_the_tokens_of_its_torch_ops(kw):
    native, torch_ops = pair(**kw)
    prompts = random_prompts([70, 45, 90, 20], 512, seed=8)
    for params in (SamplingParams(temperature=1.0, max_tokens=40, n=4, seed=13),
                   SamplingParams(temperature=0.8, top_p=0.9, max_tokens=30, n=2, seed=14),
                   SamplingParams(temperature=0, max_tokens=40)):
        same(native.generate(prompts, params), torch_ops.generate(prompts, params))
    assert native.runner.native and native.runner.native_rows > 0 and torch_ops.runner.native_rows == 0
    assert native.runner.cascade_rows > 0  # groups sharing a prefix went through it too
    assert native.model.head.small_rows and not torch_ops.model.head.small_rows
    assert native.sampler.native_rows > 0 and torch_ops.sampler.native_rows == 0  # rows drawn by the kernel
    if "kv_budget_bytes" in kw:
        assert native.scheduler.num_preemptions > 0


def test_speculation_and_weight_loads_on_the_kernels(monkeypatch):
    """Batch 1: decode steps run the small GEMM (counted around the real op), verification steps oneDNN."""
    from temper.models import fused_linear

    calls = []
    real = fused_linear.native.small_gemm
    monkeypatch.setattr(fused_linear.native, "small_gemm", lambda *a: calls.append(1) or real(*a))
    native, torch_ops = pair(speculative=SpeculativeConfig(method="ngram"))
    prompt = random_prompts([24], 512, seed=7)[0] * 4
    greedy = SamplingParams(temperature=0, max_tokens=32)
    same(native.generate([prompt], greedy), torch_ops.generate([prompt], greedy))
    assert native.stats["accepted_tokens"] > 0 and native.runner.native_rows > 0 and calls
    assert native.runner.native_segment_tokens > 0  # the drafts were verified through the segment kernel
    torch.manual_seed(1)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in native.model.state_dict().items() if "norm" not in k}
    for engine in (native, torch_ops):
        engine.load_weights(new, version=1)
    after = native.generate([prompt], greedy)
    same(after, torch_ops.generate([prompt], greedy))
    assert after[0].versions == [1] * 32


def test_int8_and_other_head_dims_run_the_torch_attention():
    int8 = LLMEngine(tiny_pair(seed=3)[0], None, EngineConfig(block_size=16, kv_dtype="int8", native_kernels="on"))
    assert not int8.runner.native  # the kernel reads and writes fp32 only
    odd = LLMEngine(tiny_pair(seed=3, head_dim=24, hidden_size=96)[0], None, EngineConfig(block_size=16,
                                                                                         native_kernels="on"))
    assert not odd.runner.native  # built for head_dim 16, 32, 64 and 128
    out = odd.generate([[1, 2, 3]], SamplingParams(max_tokens=4, seed=0))[0]
    want = LLMEngine(tiny_pair(seed=3, head_dim=24, hidden_size=96)[0], None, EngineConfig(
        block_size=16, native_kernels="off")).generate([[1, 2, 3]], SamplingParams(max_tokens=4, seed=0))[0]
    assert out.token_ids == want.token_ids and odd.model.model.layers[0].mlp.gate_up.small_rows  # small GEMM still


def test_a_second_turn_after_a_cached_prefix_attends_through_the_segment_kernel():
    native, torch_ops = pair()
    first = random_prompts([80], 512, seed=9)[0]
    greedy = SamplingParams(temperature=0, max_tokens=12)
    outs = {}
    for name, engine in (("native", native), ("torch", torch_ops)):
        reply = engine.generate([first], greedy)[0]
        second = first + reply.token_ids + random_prompts([20], 512, seed=10)[0]  # the next turn's observation
        outs[name] = engine.generate([second], greedy)
        assert outs[name][0].num_cached_prompt_tokens > 0
    same(outs["native"], outs["torch"])
    assert native.runner.native_segment_tokens > 0 and torch_ops.runner.native_segment_tokens == 0
