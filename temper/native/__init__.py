"""temper's C++ kernels for the CPU (`csrc/`), compiled once per machine on first use and cached.

- `decode_attention` (csrc/decode_attention.cpp): one op per layer and step for the engine's decoding
  rows: stores their new keys and values (paged cache and decode buffer) and attends them to their
  group's shared prefix and their own keys with one running softmax. In torch ops the same step is some
  twenty small ops per layer (writes by advanced indexing, four batched matmuls of a few query rows
  each, softmax pieces, the cascade merge).
- `segment_attention` (csrc/decode_attention.cpp): a few new tokens of one sequence (verifying drafts)
  attended to its keys in the paged cache, read through its block table in place.
- `small_gemm` (csrc/small_gemm.cpp): `x @ w.T` for 1 to 4 rows of x (decoding a few sequences, verifying
  short drafts), which reads every weight once for little arithmetic: it streams the weights at memory speed.
- `rms_norm`, `rope_`, `silu_mul` (csrc/layer_ops.cpp): a decoder layer's elementwise steps, one op each
  where torch runs several (at a decode step each costs more to dispatch than to compute).
- `sample_plain` (csrc/sampling.cpp): temperature sampling of many rows in one pass over their logits (the
  sampler's two-level inverse CDF and the tokens' logprobs).

docs/engine.md says what each saves. A leaf: `temper.models` (the fused linear layers) and
`temper.engine` (attention) both use it; it imports only torch, temper.errors and temper.firsttime.

They are built with torch.utils.cpp_extension (g++ and ninja; `scripts/setup.sh` builds them ahead, so a
first engine does not wait for the compiler) for this CPU (`-march=native`: the cache's name carries a
hash of the sources and the CPU's flags, so a home folder shared between machines never loads another
CPU's build). Where they cannot be built, `engine.native_kernels: auto` runs torch ops instead and says
so once; `native_kernels: on` makes that an error.

The build is safe to interrupt (temper/firsttime.py): it runs in a private `.tmp-*` folder under an owner
lock (`<folder>.lock`), and only a build that finished (its marker written last) is renamed into place and
loaded; a killed build's lock is taken over and its leftovers removed by the next engine (or `temper doctor`).
"""

import contextlib
import functools
import hashlib
import logging
import os
import sys
from pathlib import Path
from typing import Literal

import torch

from temper.errors import TemperError
from temper.firsttime import build_once

log = logging.getLogger(__name__)
Choice = Literal["auto", "on", "off"]
CSRC = Path(__file__).with_name("csrc")
SOURCES = [CSRC / f"{name}.cpp" for name in ("decode_attention", "small_gemm", "layer_ops", "sampling")]  # + vec.h
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-DNDEBUG"]
HEAD_DIMS = (16, 32, 64, 128)  # decode_attention's register tiles are compiled for these
SMALL_GEMM_ROWS = 4  # small_gemm's rows (from 5 on, oneDNN's GEMM was as fast or faster here)


def _build_tag() -> str:
    """A short hash of the sources (headers included) and of this CPU's model and flags (-march=native)."""
    text = "".join(p.read_text() for p in sorted(CSRC.iterdir()))
    with contextlib.suppress(OSError):
        text += "\n".join(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                          if line.startswith(("flags", "model name")))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def build_root() -> Path:
    """torch's extensions folder (TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/py3X_cpu)."""
    from torch.utils.cpp_extension import _get_build_directory

    return Path(_get_build_directory("", verbose=False))  # "" names the root itself (created if missing)


def build_folder() -> Path:
    """Where this CPU's build of the current sources lives, once complete."""
    return build_root() / f"temper_kernels_{_build_tag()}"


def _compile(tmp: Path, name: str) -> None:
    """torch's JIT build into `tmp`, a private folder: its own `lock` (a FileBaton with no owner, which a
    killed build leaves and every later load then waits on forever) can only be left where nobody looks."""
    from torch.utils.cpp_extension import load

    log.info("temper: building the C++ kernels for this machine (once, ~20 s)")
    load(name=name, sources=[str(s) for s in SOURCES], extra_cflags=CFLAGS,
         extra_ldflags=["-fopenmp"], build_directory=str(tmp), is_python_module=False,
         verbose=bool(os.environ.get("TEMPER_KERNELS_VERBOSE")))


@functools.cache
def _load() -> str | None:
    """Builds (or finds the cached build of) the kernels and registers torch.ops.temper.*; returns why
    not, or None when they are loaded."""
    if hasattr(torch.ops.temper, "decode_attention"):
        return None
    try:
        # ninja from this environment's bin folder (pip's `ninja`), where the interpreter runs from a venv
        # whose bin is not on PATH
        bin_dir = str(Path(sys.executable).parent)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
        folder = build_folder()
        # built into a temporary folder under an owner lock, renamed into place with its marker written last
        build_once(folder, "temper's C++ kernels", lambda tmp: _compile(tmp, folder.name), stamp=folder.name)
        if not hasattr(torch.ops.temper, "decode_attention"):  # built by another process, or earlier
            torch.ops.load_library(str(folder / f"{folder.name}.so"))
    except TemperError:  # a lock wait that gave up: its message names the owner
        raise
    except Exception as e:  # no compiler, no ninja, a failed build: torch ops run instead
        lines = [line for line in str(e).strip().splitlines() if line.strip()]
        return f"{type(e).__name__}: {lines[-1] if lines else e}"
    return None


def require() -> None:
    """Loads the kernels or raises one TemperError saying why they cannot be built."""
    why = _load()
    if why is not None:
        raise TemperError(f"engine.native_kernels=on: the C++ kernels could not be built ({why}); "
                          "install g++ and ninja (scripts/setup.sh does), or use native_kernels: auto or off")


_warned = False


def use(choice: Choice, device: torch.device) -> bool:
    """Whether `engine.native_kernels: choice` runs the kernels on `device` (CPU only)."""
    global _warned
    if choice == "off" or device.type != "cpu":
        return False
    if choice == "on":
        require()
        return True
    why = _load()
    if why is not None and not _warned:
        _warned = True
        log.warning("temper: the C++ kernels could not be built (%s); running torch ops", why)
    return why is None


def decode_attention(out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kbuf: torch.Tensor,
                     vbuf: torch.Tensor, lengths: torch.Tensor, kcache: torch.Tensor, vcache: torch.Tensor,
                     blocks: torch.Tensor, offsets: torch.Tensor, prefix_k: torch.Tensor, prefix_v: torch.Tensor,
                     prefix_len: torch.Tensor, row_group: torch.Tensor, scale: float) -> None:
    torch.ops.temper.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kcache, vcache, blocks, offsets, prefix_k,
                                      prefix_v, prefix_len, row_group, scale)


def segment_attention(out: torch.Tensor, q: torch.Tensor, kcache: torch.Tensor, vcache: torch.Tensor,
                      blocks: torch.Tensor, start: int, scale: float) -> None:
    torch.ops.temper.segment_attention(out, q, kcache, vcache, blocks, start, scale)


def small_gemm(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [..., K] (1 to SMALL_GEMM_ROWS rows) @ w [N, K].T (+ bias) -> [..., N]."""
    rows = x.reshape(-1, x.shape[-1])
    out = rows.new_empty(rows.shape[0], w.shape[0])
    torch.ops.temper.small_gemm(out, rows, w, bias)
    return out.view(*x.shape[:-1], w.shape[0])


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows = x.reshape(-1, x.shape[-1])
    out = torch.empty_like(rows)
    torch.ops.temper.rms_norm(out, rows, weight, eps)
    return out.view(x.shape)


def rope_(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> None:
    """x [N, H, D] rotated in place; cos, signed_sin [N, D] (RotaryEmbedding's, flattened)."""
    torch.ops.temper.rope_(x, cos, signed_sin)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """[..., 2I] -> silu(gate) * up, [..., I]."""
    rows = gate_up.reshape(-1, gate_up.shape[-1])
    out = rows.new_empty(rows.shape[0], rows.shape[1] // 2)
    torch.ops.temper.silu_mul(out, rows)
    return out.view(*gate_up.shape[:-1], out.shape[1])


def sample_plain(logits: torch.Tensor, temperatures: torch.Tensor,
                 uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens [R] and their logprobs (log_softmax(logits / t)) drawn by inverse CDF with uniforms [R] (float64)."""
    tokens = torch.empty(logits.shape[0], dtype=torch.long)
    logprobs = torch.empty(logits.shape[0], dtype=torch.float32)
    torch.ops.temper.sample_plain(tokens, logprobs, logits, temperatures, uniforms)
    return tokens, logprobs


def main() -> None:
    """scripts/setup.sh: build ahead of the first engine, and say whether it worked."""
    why = _load()
    print("[setup] temper's C++ kernels: " + ("ready" if why is None else f"not built, torch ops will run ({why})"))
