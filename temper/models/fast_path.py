"""The inference fast path of the Llama-family decoder, kept out of `llama.py` (which is the reference math
alone): `install(model, pack, native)` is what `LlamaForCausalLM.prepare_inference()` does.

It makes q/k/v_proj's weights views of one [q; k; v] matrix and gate/up_proj's of one [gate; up] matrix, so
that inference runs one GEMM where there were three and two, optionally on prepacked weights
(`fused_linear.py`), and, with `native` (the caller checked temper.native is built), runs products of 1 to 4
rows on its small GEMM and RMSNorm, RoPE and SwiGLU's activation on its kernels (fp32 on the CPU, at
inference). It does so by switching each module's class to its inference variant below: the parameters stay
the same objects (optimizers and in-place weight loads keep working, and write through to the fused matrix),
and every variant falls back to the reference forward whenever its fast path does not apply (grad enabled,
another dtype or device, a projection swapped for a LoRA wrapper, a copied or moved model). Idempotent.
"""

import torch
import torch.nn.functional as F
from torch import nn

from temper import native as native_ops
from temper.models.attention import AttentionBackend
from temper.models.fused_linear import FusedLinear, PackChoice, packable, packed_kernel, project, runs_fused
from temper.models.llama import MLP, Attention, LlamaForCausalLM, RMSNorm
from temper.models.rope import apply_rotary


def runs_native(module: nn.Module, x: torch.Tensor) -> bool:
    """`install(native=True)` set this module on temper's C++ kernels, and x is what they take: fp32 on the
    CPU, at inference."""
    return module.native and x.dtype == torch.float32 and x.device.type == "cpu" and not torch.is_grad_enabled()


class FastRMSNorm(RMSNorm):
    native = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if runs_native(self, x):  # one op where torch's CPU rms_norm runs six
            return native_ops.rms_norm(x, self.weight, self.eps)
        return super().forward(x)


class FastAttention(Attention):
    native = False  # RoPE on temper.native's kernel
    qkv: FusedLinear | None = None
    out: FusedLinear | None = None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attn: AttentionBackend) -> torch.Tensor:
        b, t, _ = x.shape
        hq, hkv, d = self.n_heads, self.n_kv, self.head_dim
        linears = (self.q_proj, self.k_proj, self.v_proj)
        if runs_fused(self.qkv, linears) and not hasattr(self, "q_norm"):
            # q and k side by side in the fused output: rotated in one pass (the ops, not the math, are fewer)
            y = self.qkv.matmul(x)
            if runs_native(self, y):  # rotated in place: one op
                native_ops.rope_(y.view(b * t, -1, d)[:, :hq + hkv], cos.view(b * t, d), sin.view(b * t, d))
                qk = y[..., :(hq + hkv) * d].view(b, t, hq + hkv, d)
            else:
                qk = apply_rotary(y[..., :(hq + hkv) * d].view(b, t, hq + hkv, d), cos, sin)
            q, k, v = qk[:, :, :hq], qk[:, :, hq:], y[..., (hq + hkv) * d:].view(b, t, hkv, d)
        else:
            q, k, v = project(self.qkv, linears, x)
            q, k, v = q.view(b, t, hq, d), k.view(b, t, hkv, d), v.view(b, t, hkv, d)
            if hasattr(self, "q_norm"):
                q, k = self.q_norm(q), self.k_norm(k)
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out = attn(self.layer, q, k, v)
        return project(self.out, (self.o_proj,), out.reshape(b, t, hq * d))[0]


class FastMLP(MLP):
    native = False  # silu(gate) * up on temper.native's kernel
    gate_up: FusedLinear | None = None
    down: FusedLinear | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        linears = (self.gate_proj, self.up_proj)
        if runs_fused(self.gate_up, linears) and runs_native(self, x):
            act = native_ops.silu_mul(self.gate_up.matmul(x))
        else:
            gate, up = project(self.gate_up, linears, x)
            act = F.silu(gate) * up
        return project(self.down, (self.down_proj,), act)[0]


class FastLlamaForCausalLM(LlamaForCausalLM):
    head: FusedLinear | None = None

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return project(self.head, (self.lm_head,), hidden)[0]


VARIANTS: dict[type, type] = {RMSNorm: FastRMSNorm, Attention: FastAttention, MLP: FastMLP,
                              LlamaForCausalLM: FastLlamaForCausalLM}


def install(model: LlamaForCausalLM, pack: PackChoice = "off", native: bool = False) -> None:
    kernel = packed_kernel(pack)

    def fused(current: FusedLinear | None, linears: list[nn.Linear]) -> FusedLinear | None:
        if any(type(lin) is not nn.Linear for lin in linears):  # e.g. LoRA wrappers: run as they are
            return None
        want = kernel if packable(linears[0].weight) else None
        if current is None or current.ptrs != current._ptrs() or current.kernel != want or \
                bool(current.small_rows) != (native and packable(linears[0].weight)):
            return FusedLinear(linears, want, native)
        return current

    for module in model.modules():
        if type(module) in VARIANTS:
            module.__class__ = VARIANTS[type(module)]
        if isinstance(module, FastRMSNorm | FastAttention | FastMLP):
            module.native = native
    for layer in model.model.layers:
        a, m = layer.self_attn, layer.mlp
        a.qkv = fused(a.qkv, [a.q_proj, a.k_proj, a.v_proj])
        m.gate_up = fused(m.gate_up, [m.gate_proj, m.up_proj])
        if kernel or native:
            a.out, m.down = fused(a.out, [a.o_proj]), fused(m.down, [m.down_proj])
    if kernel or native:
        model.head = fused(model.head, [model.lm_head])
