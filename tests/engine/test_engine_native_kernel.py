"""The C++ decode-attention kernel (`EngineConfig.attention_kernel`, native_kernels.py): the op against a
dense torch reference at every head dim it is built for, and the engine giving the tokens of its torch
ops with it (cascade groups, solo rows, mixed steps, preemption, speculation, weight loads), with proof
that it ran; a machine that cannot build it runs the torch ops, or fails in one line when asked for it."""

import copy
import os
import subprocess
import sys

import pytest
import torch
from engine_helpers import random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig, native_kernels
from temper.generation import SamplingParams


def reference(q, own_k, own_v, lengths, prefix_k, prefix_v, prefix_len, group, scale):
    """Dense softmax attention of every row to its group's prefix then its own keys."""
    b, hq = q.shape[:2]
    hkv = own_k.shape[1]
    out = torch.empty_like(q)
    for r in range(b):
        keys, vals = own_k[r, :, :lengths[r]], own_v[r, :, :lengths[r]]  # [Hkv, L, D]
        if group[r] >= 0:
            n = prefix_len[group[r]]
            keys = torch.cat([prefix_k[:, group[r], :, :n].transpose(-1, -2), keys], 1)
            vals = torch.cat([prefix_v[:, group[r], :n], vals], 1)
        keys, vals = keys.repeat_interleave(hq // hkv, 0), vals.repeat_interleave(hq // hkv, 0)
        w = torch.softmax((q[r, :, None] @ keys.transpose(-1, -2)) * scale, -1)  # [Hq, 1, L]
        out[r] = (w @ vals)[:, 0]
    return out


@pytest.mark.parametrize("head_dim", native_kernels.HEAD_DIMS)
def test_the_op_equals_dense_attention_and_stores_the_new_keys(head_dim):
    native_kernels.require()
    torch.manual_seed(head_dim)
    b, hkv, g, cap, bs, nblocks = 7, 2, 3, 600, 4, 12
    q, k, v = torch.randn(b, hkv * g, head_dim), torch.randn(b, hkv, head_dim), torch.randn(b, hkv, head_dim)
    # own lengths past one 256-key chunk and a prefix of 13 tokens (a tail shorter than a vector)
    lengths = torch.tensor([1, 5, 300, 40, 17, 530, 2])
    kbuf, vbuf = torch.randn(b + 2, hkv, cap, head_dim), torch.randn(b + 2, hkv, cap, head_dim)
    kc, vc = torch.zeros(hkv, nblocks, bs, head_dim), torch.zeros(hkv, nblocks, bs, head_dim)
    blocks, offsets = torch.tensor([3, 4, 5, 6, 7, 8, 9]), torch.tensor([0, 1, 2, 3, 0, 1, 2])
    prefix_len = torch.tensor([13, 64, 0])
    prefix_k, prefix_v = torch.randn(hkv, 3, head_dim, 64), torch.randn(hkv, 3, 64, head_dim)
    group = torch.tensor([0, 1, 0, -1, 1, 0, 2])
    out = torch.empty_like(q)
    kbuf0, vbuf0 = kbuf.clone(), vbuf.clone()
    native_kernels.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kc, vc, blocks, offsets, prefix_k, prefix_v,
                                    prefix_len, group, head_dim**-0.5)
    rows = torch.arange(b)
    kbuf0[rows, :, lengths - 1], vbuf0[rows, :, lengths - 1] = k, v  # what the op must have stored
    assert torch.equal(kbuf, kbuf0) and torch.equal(vbuf, vbuf0)
    assert torch.equal(kc[:, blocks, offsets], k.transpose(0, 1)) and torch.equal(vc[:, blocks, offsets],
                                                                                     v.transpose(0, 1))
    want = reference(q, kbuf, vbuf, lengths, prefix_k, prefix_v, prefix_len, group, head_dim**-0.5)
    torch.testing.assert_close(out, want, atol=2e-5, rtol=2e-5)
    # no groups at all: empty prefix tensors
    native_kernels.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kc, vc, blocks, offsets, torch.empty(0),
                                    torch.empty(0), torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long),
                                    head_dim**-0.5)
    none = torch.full((b,), -1)
    torch.testing.assert_close(out, reference(q, kbuf, vbuf, lengths, prefix_k, prefix_v, prefix_len, none,
                                              head_dim**-0.5), atol=2e-5, rtol=2e-5)


def test_a_bad_call_is_one_error_not_a_crash():
    native_kernels.require()
    q = torch.randn(2, 3, 64)
    k = v = torch.randn(2, 1, 64)
    buf = torch.zeros(2, 1, 8, 64)
    cache = torch.zeros(1, 4, 4, 64)
    none, no_rows = torch.empty(0), torch.empty(0, dtype=torch.long)
    with pytest.raises(RuntimeError, match="row 1 length 9 out of range"):
        native_kernels.decode_attention(torch.empty_like(q), q, k, v, buf, buf.clone(), torch.tensor([1, 9]), cache,
                                        cache.clone(), torch.tensor([0, 1]), torch.tensor([0, 0]), none, none,
                                        no_rows, no_rows, 0.125)
    with pytest.raises(RuntimeError, match="writes outside the cache"):
        native_kernels.decode_attention(torch.empty_like(q), q, k, v, buf, buf.clone(), torch.tensor([1, 2]), cache,
                                        cache.clone(), torch.tensor([0, 4]), torch.tensor([0, 0]), none, none,
                                        no_rows, no_rows, 0.125)


def pair(**kw) -> tuple[LLMEngine, LLMEngine]:
    model = tiny_pair(seed=3)[0]
    return tuple(LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, attention_kernel=kernel, **kw))
                 for kernel in ("native", "torch"))


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
    if "kv_budget_bytes" in kw:
        assert native.scheduler.num_preemptions > 0


def test_speculation_and_weight_loads_on_the_kernel():
    native, torch_ops = pair(speculative=SpeculativeConfig(method="ngram"))
    prompt = random_prompts([24], 512, seed=7)[0] * 4
    greedy = SamplingParams(temperature=0, max_tokens=32)
    same(native.generate([prompt], greedy), torch_ops.generate([prompt], greedy))
    assert native.stats["accepted_tokens"] > 0 and native.runner.native_rows > 0
    torch.manual_seed(1)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in native.model.state_dict().items() if "norm" not in k}
    for engine in (native, torch_ops):
        engine.load_weights(new, version=1)
    after = native.generate([prompt], greedy)
    same(after, torch_ops.generate([prompt], greedy))
    assert after[0].versions == [1] * 32


def test_int8_and_unsupported_head_dims_run_the_torch_ops():
    int8 = LLMEngine(tiny_pair(seed=3)[0], None, EngineConfig(block_size=16, kv_dtype="int8"))
    assert not int8.runner.native  # the kernel reads and writes fp32 only
    odd = LLMEngine(tiny_pair(seed=3, head_dim=24, hidden_size=96)[0], None, EngineConfig(block_size=16))
    assert not odd.runner.native
    odd.generate([[1, 2, 3]], SamplingParams(max_tokens=4))
    with pytest.raises(Exception, match="attention_kernel=native: the kernel is built for head_dim"):
        LLMEngine(tiny_pair(seed=3, head_dim=24, hidden_size=96)[0], None,
                  EngineConfig(block_size=16, attention_kernel="native"))


@pytest.mark.timeout(120)
def test_without_a_compiler_auto_runs_torch_ops_and_native_fails_in_one_line(tmp_path):
    """A real failed build: no compiler (CXX names none) and an empty extensions folder."""
    code = ("import sys; sys.path.insert(0, 'tests/engine')\n"
            "from engine_helpers import tiny_pair\n"
            "from temper.engine import EngineConfig, LLMEngine\n"
            "from temper.generation import SamplingParams\n"
            "e = LLMEngine(tiny_pair(seed=3)[0], None, EngineConfig(block_size=16))\n"
            "e.generate([[1, 2, 3]], SamplingParams(max_tokens=4))\n"
            "print('native', e.runner.native)\n"
            "LLMEngine(tiny_pair(seed=3)[0], None, EngineConfig(block_size=16, attention_kernel='native'))\n")
    env = {**os.environ, "CXX": str(tmp_path / "no-compiler"), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=110,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert "native False" in out.stdout, out.stderr[-2000:]
    assert "C++ attention kernel could not be built" in out.stderr
    assert out.returncode != 0 and "engine.attention_kernel=native: the C++ kernels could not be built" in out.stderr
