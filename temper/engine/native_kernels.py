"""The engine's C++ kernels (`csrc/`), compiled once per machine on first use and cached.

`decode_attention` (csrc/decode_attention.cpp) is one op per layer and step for the decoding rows on
the CPU: it stores their new keys and values (paged cache and decode buffer) and attends them to their
group's shared prefix and their own keys with one running softmax, in parallel on torch's threads. The
same step in torch ops is some twenty small ops per layer (writes by advanced indexing, four batched
matmuls of three query rows each, softmax pieces, the cascade merge); see docs/engine.md for what it
saves.

It is built with torch.utils.cpp_extension (g++ and ninja; `scripts/setup.sh` builds it ahead, so a
first engine does not wait for the compiler) for this CPU (`-march=native`: the cache's name carries a
hash of the CPU's flags, so a home folder shared between machines never loads another CPU's build).
Where it cannot be built the engine runs the torch ops (`EngineConfig.attention_kernel`: auto) and
says so once; `attention_kernel: native` makes that an error instead.
"""

import contextlib
import functools
import hashlib
import logging
import os
import sys
from pathlib import Path

import torch

from temper.errors import TemperError

log = logging.getLogger(__name__)
HEAD_DIMS = (16, 32, 64, 128)  # the kernel's register tiles are compiled for these
SOURCES = [Path(__file__).with_name("csrc") / "decode_attention.cpp"]
CFLAGS = ["-O3", "-march=native", "-fopenmp", "-fno-math-errno", "-DNDEBUG"]


def _cpu_tag() -> str:
    """A short hash of this CPU's model and flags (the build is -march=native)."""
    text = ""
    with contextlib.suppress(OSError):
        text = "\n".join(line for line in Path("/proc/cpuinfo").read_text().splitlines()
                         if line.startswith(("flags", "model name")))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@functools.cache
def _load() -> str | None:
    """Builds (or finds the cached build of) the kernels and registers torch.ops.temper.*; returns why
    not, or None when they are loaded."""
    if hasattr(torch.ops.temper, "decode_attention"):
        return None
    try:
        from torch.utils.cpp_extension import _get_build_directory, load

        # ninja from this environment's bin folder (pip's `ninja`), where the interpreter runs from a venv
        # whose bin is not on PATH
        bin_dir = str(Path(sys.executable).parent)
        if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")
        name = f"temper_kernels_{_cpu_tag()}"
        if not any(Path(_get_build_directory(name, verbose=False)).glob("*.so")):
            log.info("temper: building the engine's C++ kernels for this machine (once, ~15 s)")
        load(name=name, sources=[str(s) for s in SOURCES], extra_cflags=CFLAGS,
             extra_ldflags=["-fopenmp"], is_python_module=False,
             verbose=bool(os.environ.get("TEMPER_KERNELS_VERBOSE")))
    except Exception as e:  # no compiler, no ninja, a failed build: the torch path runs
        lines = [line for line in str(e).strip().splitlines() if line.strip()]
        return f"{type(e).__name__}: {lines[-1] if lines else e}"
    return None


def available() -> bool:
    return _load() is None


def require() -> None:
    """Loads the kernels or raises one TemperError saying why they cannot be built."""
    why = _load()
    if why is not None:
        raise TemperError(f"engine.attention_kernel=native: the C++ kernels could not be built ({why}); "
                          "install g++ and ninja (scripts/setup.sh does), or use attention_kernel: auto or torch")


_warned = False


def use(choice: str, device: torch.device, head_dim: int) -> bool:
    """Whether an engine with `attention_kernel: choice` on `device` runs the native kernels."""
    global _warned
    if choice == "torch" or device.type != "cpu":
        return False
    if choice == "native":
        require()
        if head_dim not in HEAD_DIMS:
            raise TemperError(f"engine.attention_kernel=native: the kernel is built for head_dim {HEAD_DIMS}, "
                              f"not {head_dim}; use attention_kernel: auto or torch")
        return True
    why = _load()
    if why is not None and not _warned:
        _warned = True
        log.warning("temper: the engine's C++ attention kernel could not be built (%s); running torch ops", why)
    return why is None and head_dim in HEAD_DIMS


def decode_attention(out: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kbuf: torch.Tensor,
                     vbuf: torch.Tensor, lengths: torch.Tensor, kcache: torch.Tensor, vcache: torch.Tensor,
                     blocks: torch.Tensor, offsets: torch.Tensor, prefix_k: torch.Tensor, prefix_v: torch.Tensor,
                     prefix_len: torch.Tensor, row_group: torch.Tensor, scale: float) -> None:
    torch.ops.temper.decode_attention(out, q, k, v, kbuf, vbuf, lengths, kcache, vcache, blocks, offsets, prefix_k,
                                      prefix_v, prefix_len, row_group, scale)


def main() -> None:
    """scripts/setup.sh: build ahead of the first engine, and say whether it worked."""
    why = _load()
    print("[setup] the engine's C++ kernels: " + ("ready" if why is None else f"not built, torch ops will run ({why})"))
