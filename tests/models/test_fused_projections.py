"""`LlamaForCausalLM.prepare_inference`: one GEMM for q/k/v and gate/up, optionally on oneDNN's or MKL's
packed weights, at inference only; the parameters stay the objects optimizers and weight loads hold."""

import copy

import pytest
import torch

from temper.models import LlamaForCausalLM, ModelConfig


def tiny(seed: int = 0, **kw) -> LlamaForCausalLM:
    cfg = ModelConfig(vocab_size=256, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=128,
                      eos_token_id=None, **kw)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.1)
    return model.eval()


def logits(model: LlamaForCausalLM, ids: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model.logits(ids)


KERNELS = ["onednn", "mkl"]


@pytest.mark.parametrize("pack", ["off", *KERNELS])
@pytest.mark.parametrize("bias", [False, True])
def test_fused_inference_equals_the_separate_projections(pack: str, bias: bool):
    model = tiny(attention_bias=bias)
    ids = torch.randint(0, 256, (3, 17))
    want = logits(model, ids)
    params = {name: id(p) for name, p in model.named_parameters()}
    keys = list(model.state_dict())
    model.prepare_inference(pack=pack)
    a, m = model.model.layers[0].self_attn, model.model.layers[0].mlp
    assert {name: id(p) for name, p in model.named_parameters()} == params  # the same Parameter objects
    assert list(model.state_dict()) == keys
    assert a.q_proj.weight.data_ptr() == a.qkv.weight.data_ptr()  # q/k/v are views of one matrix
    assert m.up_proj.weight.data_ptr() == m.gate_up.weight.data_ptr() + m.gate_proj.weight.numel() * 4
    with torch.inference_mode():
        assert a.qkv.usable() and m.gate_up.usable()
    torch.testing.assert_close(logits(model, ids), want, atol=1e-5, rtol=1e-5)
    if pack != "off":  # the packed kernel ran (one row too: oneDNN runs every row count)
        assert a.qkv.kernel == pack and a.qkv._packed is not None and model.head._packed is not None
        torch.testing.assert_close(logits(model, ids[:1, :1]), want[:1, :1], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("bias", [False, True])
def test_native_kernels_at_inference_equal_torch_and_leave_training_alone(bias: bool):
    from temper import native

    native.require()
    model = tiny(attention_bias=bias)
    ids = torch.randint(0, 256, (2, 9))
    reference = copy.deepcopy(model)
    model.prepare_inference(pack="onednn", native=True)
    a = model.model.layers[0].self_attn
    assert a.qkv.small_rows == range(1, native.SMALL_GEMM_ROWS + 1) and model.head.small_rows
    assert a.native and model.model.layers[0].mlp.native and model.model.norm.native  # RMSNorm, RoPE, SwiGLU
    for rows in (ids[:1, :1], ids[:, :1], ids[:1, :4], ids[:1]):  # 1, 2 and 4 rows (small GEMM), 9 (oneDNN)
        torch.testing.assert_close(logits(model, rows), logits(reference, rows), atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # an in-place load is seen at once: the small GEMM reads the fused matrix itself
        for m in (model, reference):
            m.model.layers[1].mlp.up_proj.weight.mul_(-1.0)
    torch.testing.assert_close(logits(model, ids[:1, :1]), logits(reference, ids[:1, :1]), atol=1e-5, rtol=1e-5)
    model.train()  # with grad: the separate projections and torch ops, gradients reach the parameters
    model.logits(ids).logsumexp(-1).mean().backward()
    assert model.model.layers[0].input_layernorm.weight.grad is not None and a.q_proj.weight.grad is not None


def test_auto_picks_mkl_on_intel_and_onednn_elsewhere(monkeypatch):
    from temper.models import fused_linear

    for vendor, kernel in (("GenuineIntel", "mkl"), ("AuthenticAMD", "onednn"), ("", "onednn")):
        monkeypatch.setattr(fused_linear, "cpu_vendor", lambda v=vendor: v)
        assert fused_linear.packed_kernel("auto") == kernel
    assert fused_linear.packed_kernel("off") is None


@pytest.mark.parametrize("pack", KERNELS)
def test_in_place_changes_reach_the_fused_and_packed_weights(pack: str):
    """An optimizer step (training runs the separate projections, grads on the parameters) and an
    in-place copy both show in the next fused inference: the packed copy is rebuilt."""
    model = tiny()
    model.prepare_inference(pack=pack)
    ids = torch.randint(0, 256, (2, 9))
    before = logits(model, ids)
    packed = model.model.layers[0].self_attn.qkv._packed
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss = model.logits(ids).logsumexp(-1).mean()
    loss.backward()
    assert model.model.layers[0].self_attn.q_proj.weight.grad is not None
    opt.step()
    model.eval()
    reference = tiny()
    reference.load_state_dict(model.state_dict())
    after = logits(model, ids)
    assert not torch.allclose(after, before)
    torch.testing.assert_close(after, logits(reference, ids), atol=1e-5, rtol=1e-5)
    assert model.model.layers[0].self_attn.qkv._packed is not packed  # repacked
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight.mul_(-1.0)  # as LLMEngine.load_weights copies, in place
        reference.model.layers[1].mlp.up_proj.weight.mul_(-1.0)
    torch.testing.assert_close(logits(model, ids), logits(reference, ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("pack", KERNELS)
def test_a_copied_or_moved_model_falls_back_to_the_separate_projections(pack: str):
    model = tiny()
    model.prepare_inference(pack=pack)
    ids = torch.randint(0, 256, (1, 7))
    logits(model, ids)  # packed now: MKL's packed layout cannot be copied, the copy gets no fused view
    moved = copy.deepcopy(model)
    assert moved.model.layers[0].self_attn.qkv is None and moved.head is None
    torch.testing.assert_close(logits(moved, ids), logits(model, ids), atol=1e-5, rtol=1e-5)
    model.to(torch.float64)  # new storage: the fused matrices no longer back the parameters
    with torch.inference_mode():
        assert not model.model.layers[0].self_attn.qkv.usable()
        got = model.logits(ids)
    torch.testing.assert_close(got.float(), logits(moved, ids), atol=1e-4, rtol=1e-4)
    model.prepare_inference(pack=pack)  # fused again on the new storage; float64 is not packed
    with torch.inference_mode():
        assert model.model.layers[0].self_attn.qkv.usable() and model.model.layers[0].self_attn.qkv.kernel is None


def test_lora_wrapped_projections_are_not_fused_over():
    """A projection swapped for a LoRA wrapper (before or after fusing) runs as the wrapper computes it."""
    from temper.rl.lora import apply_lora

    ids = torch.randint(0, 256, (1, 9))
    for fuse_first in (True, False):
        model = tiny()
        if fuse_first:
            model.prepare_inference(pack="auto")
        apply_lora(model, rank=4)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5)  # a non-zero adapter: fusing over it would change the output
        want = logits(copy.deepcopy(model), ids)  # a copy runs unfused
        model.prepare_inference(pack="auto")
        assert model.model.layers[0].self_attn.qkv is None and model.model.layers[0].mlp.gate_up is not None
        torch.testing.assert_close(logits(model, ids), want, atol=1e-5, rtol=1e-5)
