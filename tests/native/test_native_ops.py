"""temper's C++ kernels (temper/native) against torch references: decode attention at every head dim it is
built for, the small GEMM against F.linear, on one thread and two; a bad call is one error, not a crash; a
machine that cannot build them runs torch ops, or fails in one line when they are asked for."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from temper import native

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


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


@pytest.mark.parametrize("head_dim", native.HEAD_DIMS)
def test_decode_attention_equals_dense_attention_and_stores_the_new_keys(head_dim, threads):
    native.require()
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
    native.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kc, vc, blocks, offsets, prefix_k, prefix_v,
                                    prefix_len, group, head_dim**-0.5)
    rows = torch.arange(b)
    kbuf0[rows, :, lengths - 1], vbuf0[rows, :, lengths - 1] = k, v  # what the op must have stored
    assert torch.equal(kbuf, kbuf0) and torch.equal(vbuf, vbuf0)
    assert torch.equal(kc[:, blocks, offsets], k.transpose(0, 1)) and torch.equal(vc[:, blocks, offsets],
                                                                                     v.transpose(0, 1))
    want = reference(q, kbuf, vbuf, lengths, prefix_k, prefix_v, prefix_len, group, head_dim**-0.5)
    torch.testing.assert_close(out, want, atol=2e-5, rtol=2e-5)
    # no groups at all: empty prefix tensors
    native.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kc, vc, blocks, offsets, torch.empty(0),
                                    torch.empty(0), torch.empty(0, dtype=torch.long), torch.empty(0, dtype=torch.long),
                                    head_dim**-0.5)
    none = torch.full((b,), -1)
    torch.testing.assert_close(out, reference(q, kbuf, vbuf, lengths, prefix_k, prefix_v, prefix_len, none,
                                              head_dim**-0.5), atol=2e-5, rtol=2e-5)


def test_a_bad_call_is_one_error_not_a_crash():
    native.require()
    q = torch.randn(2, 3, 64)
    k = v = torch.randn(2, 1, 64)
    buf = torch.zeros(2, 1, 8, 64)
    cache = torch.zeros(1, 4, 4, 64)
    none, no_rows = torch.empty(0), torch.empty(0, dtype=torch.long)
    with pytest.raises(RuntimeError, match="row 1 length 9 out of range"):
        native.decode_attention(torch.empty_like(q), q, k, v, buf, buf.clone(), torch.tensor([1, 9]), cache,
                                        cache.clone(), torch.tensor([0, 1]), torch.tensor([0, 0]), none, none,
                                        no_rows, no_rows, 0.125)
    with pytest.raises(RuntimeError, match="writes outside the cache"):
        native.decode_attention(torch.empty_like(q), q, k, v, buf, buf.clone(), torch.tensor([1, 2]), cache,
                                        cache.clone(), torch.tensor([0, 4]), torch.tensor([0, 0]), none, none,
                                        no_rows, no_rows, 0.125)


@pytest.mark.parametrize("rows", range(1, native.SMALL_GEMM_ROWS + 1))
@pytest.mark.parametrize("shape", [(576, 960), (64, 1000), (40, 33)], ids=["smollm2-qkv", "odd-n", "odd-k"])
def test_small_gemm_equals_f_linear(rows, shape, threads):
    native.require()
    k, n = shape
    torch.manual_seed(rows)
    w, b, x = torch.randn(n, k), torch.randn(n), torch.randn(1, rows, k)
    for bias in (None, b):
        got = native.small_gemm(x, w, bias)
        assert got.shape == (1, rows, n)
        torch.testing.assert_close(got, F.linear(x, w, bias), atol=1e-4, rtol=1e-4)


def test_small_gemm_refuses_more_rows_than_its_tiles():
    native.require()
    with pytest.raises(RuntimeError, match=f"{native.SMALL_GEMM_ROWS + 1} rows"):
        native.small_gemm(torch.randn(native.SMALL_GEMM_ROWS + 1, 16), torch.randn(8, 16), None)


@pytest.mark.timeout(120)
def test_without_a_compiler_auto_runs_torch_ops_and_on_fails_in_one_line(tmp_path):
    """A real failed build: CXX names no compiler, and the extensions folder is empty."""
    code = ("from temper.engine import EngineConfig, LLMEngine\n"
            "from temper.generation import SamplingParams\n"
            "from temper.models import LlamaForCausalLM, ModelConfig\n"
            "cfg = ModelConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,\n"
            "                  num_attention_heads=2, num_key_value_heads=1, head_dim=16, eos_token_id=None)\n"
            "e = LLMEngine(LlamaForCausalLM(cfg), None, EngineConfig(block_size=16))\n"
            "e.generate([[1, 2, 3]], SamplingParams(max_tokens=4))\n"
            "print('native', e.runner.native, bool(e.model.model.layers[0].mlp.gate_up.small_rows))\n"
            "LLMEngine(LlamaForCausalLM(cfg), None, EngineConfig(block_size=16, native_kernels='on'))\n")
    env = {**os.environ, "CXX": str(tmp_path / "no-compiler"), "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=110,
                         cwd=ROOT)
    assert "native False False" in out.stdout, out.stderr[-2000:]
    assert "the C++ kernels could not be built" in out.stderr
    assert out.returncode != 0 and "engine.native_kernels=on: the C++ kernels could not be built" in out.stderr


@pytest.mark.parametrize("rows", [1, 3, 200])
def test_layer_ops_equal_their_torch_ops(rows, threads):
    """RMSNorm, RoPE (in place, on a strided view of a fused q/k/v output) and silu(gate) * up."""
    from temper.models.rope import apply_rotary

    native.require()
    torch.manual_seed(rows)
    x, w = torch.randn(rows, 576) * 3, torch.randn(576)
    torch.testing.assert_close(native.rms_norm(x, w, 1e-5), F.rms_norm(x, (576,), w, 1e-5), atol=1e-5, rtol=1e-5)
    fused = torch.randn(rows, 15, 64)  # 9 q heads, 3 k heads, 3 v heads
    angles = torch.randn(rows, 32) * 10
    cos, sin = torch.cat([angles.cos()] * 2, -1), torch.cat([-angles.sin(), angles.sin()], -1)
    want = apply_rotary(fused[:, :12], cos[:, None], sin[:, None])
    v_before = fused[:, 12:].clone()
    native.rope_(fused[:, :12], cos, sin)
    torch.testing.assert_close(fused[:, :12], want, atol=1e-5, rtol=1e-5)
    assert torch.equal(fused[:, 12:], v_before)  # values untouched
    gate_up = torch.randn(rows, 2 * 1536) * 8  # large |gate| too: exp's clamped range
    gate, up = gate_up.split(1536, -1)
    torch.testing.assert_close(native.silu_mul(gate_up), F.silu(gate) * up, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("head_dim", native.HEAD_DIMS)
@pytest.mark.parametrize("n, start", [(1, 37), (5, 300), (17, 270)])
def test_segment_attention_equals_causal_attention_over_the_block_table(head_dim, n, start, threads):
    """Token j of a segment sees positions [0, start + j], read from the paged cache in place."""
    native.require()
    torch.manual_seed(n)
    hkv, g, bs, nblocks = 2, 3, 16, 40
    kc, vc = torch.randn(hkv, nblocks, bs, head_dim), torch.randn(hkv, nblocks, bs, head_dim)
    table = torch.randperm(nblocks)[:(start + n + bs - 1) // bs]
    q = torch.randn(n, hkv * g, head_dim)
    out = torch.empty_like(q)
    native.segment_attention(out, q, kc, vc, table, start, head_dim**-0.5)
    keys = kc[:, table].flatten(1, 2)[:, :start + n].repeat_interleave(g, 0)  # [Hq, L, D]
    vals = vc[:, table].flatten(1, 2)[:, :start + n].repeat_interleave(g, 0)
    scores = (q.transpose(0, 1) @ keys.transpose(-1, -2)) * head_dim**-0.5  # [Hq, n, L]
    allowed = torch.arange(start + n)[None, :] <= torch.arange(start, start + n)[:, None]
    want = (scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ vals).transpose(0, 1)
    torch.testing.assert_close(out, want, atol=2e-5, rtol=2e-5)
    with pytest.raises(RuntimeError, match="does not cover the segment"):
        native.segment_attention(out, q, kc, vc, table[:1], start, head_dim**-0.5)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sample_plain_draws_the_tokens_of_the_two_level_inverse_cdf(temperature, threads):
    from temper.engine.sampler import inverse_cdf

    native.require()
    torch.manual_seed(3)
    logits = torch.randn(40, 3000) * 5  # 3 blocks of 1024 and a partial one
    u = torch.rand(40, dtype=torch.float64)
    u[:2] = torch.tensor([0.0, 1.0], dtype=torch.float64)  # the ends of the range
    tokens, logprobs = native.sample_plain(logits, torch.full((40,), temperature), u)
    scaled = logits / temperature
    peak = scaled.amax(-1, keepdim=True)
    weights = (scaled - peak).exp()
    want = inverse_cdf(weights, u)
    assert torch.equal(tokens, want)
    lse = peak + weights.sum(-1, keepdim=True).log()
    torch.testing.assert_close(logprobs, (scaled.gather(1, want[:, None]) - lse)[:, 0], atol=1e-5, rtol=1e-5)
