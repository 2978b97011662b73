"""A kernel build killed while it compiles (holding temper's lock and torch's own `lock` baton) never wedges
the next engine: that one takes the lock over, removes the half-built folder and builds anew, and its
engine samples the tokens of the torch-ops engine. Runs in temporary TORCH_EXTENSIONS_DIR folders."""

import os
import re

import pytest
from interrupt_helpers import env, kill_when, python, run, start

pytestmark = pytest.mark.e2e

NEXT_ENGINE = """
import copy, logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s")
sys.path.insert(0, "tests/engine")
from engine_helpers import random_prompts, tiny_pair
from temper.engine import EngineConfig, LLMEngine
from temper.generation import SamplingParams
model = tiny_pair(seed=3)[0]
on, off = (LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, native_kernels=c)) for c in ("on", "off"))
prompts, params = random_prompts([30, 12], 512, seed=8), SamplingParams(temperature=0.8, max_tokens=12, n=2, seed=3)
a, b = on.generate(prompts, params), off.generate(prompts, params)
assert on.runner.native_rows > 0 and off.runner.native_rows == 0
print("same tokens:", [c.token_ids for c in a] == [c.token_ids for c in b])
"""


@pytest.mark.timeout(900)
def test_a_build_killed_mid_compile_is_taken_over_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    from temper import native

    folder = native.build_folder()
    # what a build by torch alone left when killed: its baton and no completion marker (it once wedged us)
    folder.mkdir(parents=True)
    (folder / "lock").touch()
    environ = env(TORCH_EXTENSIONS_DIR=str(tmp_path))
    first = start(python("from temper.native import main; main()"), environ)
    batons = lambda: any(tmp_path.glob(".tmp-temper_kernels_*/lock"))  # noqa: E731 (g++ is running)
    kill_when(first, batons, timeout=300)
    assert (tmp_path / f"{folder.name}.lock").read_text()  # the killed owner's record is still there

    out = run(python(NEXT_ENGINE), environ, timeout=800).stdout
    assert "same tokens: True" in out, out
    assert re.search(rf"taking over .*{folder.name}.lock from pid {first.pid} .*which is gone", out), out
    assert "left by an interrupted build" in out and "no completion marker" in out, out
    assert sorted(os.listdir(tmp_path)) == [folder.name, f"{folder.name}.lock"]  # no leftovers
    assert (folder / f"{folder.name}.so").is_file() and not (folder / "lock").exists()
