"""temper's processes run on tcmalloc where it is installed (temper/malloc.py): the process is
re-executed once with it preloaded and its children get the environment it was started with."""

import os
import subprocess
import sys

from temper.malloc import tcmalloc_path

PROBE = """
import os, subprocess
from temper.malloc import active, use_fast_allocator
use_fast_allocator()
child = subprocess.run(["sh", "-c", 'printf "%s" "$LD_PRELOAD"'], capture_output=True, text=True).stdout
print(active(), "|", child, "|", os.environ.get("TEMPER_MALLOC_REEXEC"))
"""


def probe(**env: str) -> list[str]:
    base = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "TEMPER_MALLOC")}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60, env={**base, **env})
    assert r.returncode == 0, r.stderr
    return [x.strip() for x in r.stdout.strip().split("|")]


def test_the_allocator_is_tcmalloc_where_installed_and_children_start_unchanged():
    allocator, child, mark = probe()
    assert allocator == ("tcmalloc" if tcmalloc_path() else "glibc-tuned")
    assert child == "" and mark == "None"  # nothing of it leaks into sandboxed commands or servers


def test_a_users_own_preload_is_kept_for_the_children():
    libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6",
                            "/lib64/libm.so.6") if os.path.exists(p))
    allocator, child, _ = probe(LD_PRELOAD=libm)
    assert allocator == ("tcmalloc" if tcmalloc_path() else "glibc-tuned") and child == libm


def test_temper_malloc_system_turns_it_off():
    assert probe(TEMPER_MALLOC="system")[0] == "system"
