"""runtime.device: tensors follow the model's device, resolve_device's answers and errors, and CPU
results unchanged (CUDA is not exercised here: these machines have none)."""

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from device_helpers import TensorDevices, engine_tensors, factory_calls_without_device, step_by_hand
from engine_helpers import tiny_config, tiny_pair

from temper.config.loader import ConfigError, load_config
from temper.engine import EngineConfig, LLMEngine
from temper.engine.kv_cache import select_blocks
from temper.errors import TemperError
from temper.generation import SamplingParams
from temper.models import LlamaForCausalLM, load_model, save_model
from temper.models.toy import toy_tokenizer
from temper.runtime import RuntimeConfig, resolve_device

ROOT = Path(__file__).resolve().parents[2]

# Host-side tensors on purpose: (file, enclosing def, factory) -> why it stays on the host.
HOST_TENSORS = {
    ("temper/engine/lazy_memory.py", "lazy_zeros", "from_numpy"):
        "the CPU branch only: lazily mapped zero pages (other devices take torch.zeros(device=...))",
    ("temper/engine/llm_engine.py", "LLMEngine.add_request", "randint"):
        "a request's seed, drawn from the engine's host generator (an int, never on the device)",
    ("temper/engine/sampler.py", "uniform", "rand"):
        "each sample's uniform from its own host generator: the same draws on every device, moved in one copy",
    ("temper/models/gguf_loader.py", "gguf_state_dict", "from_numpy"):
        "decoding a GGUF file into an HF folder on disk; load_model then reads that onto the device",
    ("temper/models/llama.py", "RMSNorm.__init__", "ones"):
        "module construction: like nn.Linear's parameters, follows torch's default device; load_model moves it",
}
GREEDY = [[75, 75, 457, 457, 457, 7, 365, 145], [284, 312, 149, 76, 284, 511, 149, 76],
          [309, 373, 389, 284, 37, 94, 312, 207]]  # recorded from the engine before devices existed
SAMPLED = [[28, 107, 109, 88, 292, 57], [28, 105, 120, 88, 285, 53], [27, 108, 111, 83, 285, 51]]
PROMPTS = [[5, 90, 14, 300, 2, 7, 11], [8, 8, 2, 160, 10, 4, 6, 120, 1, 17, 13], [8, 8, 2, 160, 10, 4, 6, 120, 33, 3]]


def test_every_tensor_factory_names_a_device_or_is_a_listed_host_tensor():
    found = factory_calls_without_device(ROOT, ["temper/engine", "temper/models", "temper/serve"])
    assert len(found) >= len(HOST_TENSORS)  # the scan sees the listed ones: it really ran
    unlisted = [f"{f}:{line} {scope}: torch.{name}" for f, scope, name, line in found
                if (f, scope, name) not in HOST_TENSORS]
    assert not unlisted, "torch factories without device= (pass one, derive with *_like/.new_*, or list it):\n" + \
        "\n".join(unlisted)
    stale = set(HOST_TENSORS) - {(f, scope, name) for f, scope, name, _ in found}
    assert not stale, f"listed host tensors that no longer exist: {sorted(stale)}"


ENGINE_PATHS = {  # each exercises other attention paths
    "buffer+cascade": dict(),
    "gathered+int8+chunked": dict(decode_buffer_bytes=0, kv_dtype="int8", cascade_attention=False,
                                  max_num_batched_tokens=6),
    "buffer+sdpa": dict(cascade_attention=False),
    "buffer+int4": dict(kv_dtype="int4"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", list(ENGINE_PATHS))
def test_engine_on_meta_makes_no_cpu_tensor(path):
    """The whole engine step (metadata, KV writes, decode buffer, attention, logits) on a model on the meta
    device: every tensor torch returns is on meta, none on the CPU; so each follows the model's device."""
    model = LlamaForCausalLM(tiny_config()).to("meta")
    engine = LLMEngine(model, None, EngineConfig(kv_budget_bytes=1024**2, block_size=4, **ENGINE_PATHS[path]))
    assert engine.device.type == "meta" and engine.runner.sdpa_decode  # off the CPU: decode through SDPA
    seen = TensorDevices()
    greedy = SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True)
    engine.add_request(list(range(1, 11)), greedy)
    logits = [step_by_hand(engine, seen) for _ in range(2)]
    engine.add_request([*range(1, 9), 40, 41], greedy)  # its first 2 blocks are cached: a prefix hit
    logits += [step_by_hand(engine, seen) for _ in range(4)]
    assert seen.devices["cpu"] == 0, f"CPU tensors from {seen.on_cpu}"
    assert seen.devices["meta"] > 100 and seen.calls["scaled_dot_product_attention"] > 0
    assert all(t.device.type == "meta" and t.shape[-1] == 512 for t in logits)
    held = engine_tensors(engine)
    assert {n: t.device.type for n, t in held.items() if t.device.type != "meta"} == {}
    if path == "buffer+cascade":
        assert engine.runner.cascade_rows > 0 and engine.runner.buffer.refilled_rows > 0
    elif path.startswith("gathered"):
        assert "cache.rotation" in held and engine.runner.buffer.k is None
    else:
        assert engine.runner.buffer.appended_rows > 0


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(TemperError, match=r"^runtime.device='tpu': must be auto, cpu, cuda or cuda:N$"):
        resolve_device("tpu")
    if torch.cuda.is_available():
        assert resolve_device("cuda").type == "cuda"
        return
    for spec in ("cuda", "cuda:1"):
        with pytest.raises(TemperError) as err:
            resolve_device(spec)
        message = str(err.value)
        assert message.startswith(f"runtime.device='{spec}': CUDA is not available") and "\n" not in message


def test_a_bad_device_in_the_config_is_one_line_naming_the_field():
    assert RuntimeConfig().device == "auto"
    with pytest.raises(ConfigError) as err:
        load_config(RuntimeConfig, overrides=["device=gpu0"])
    assert err.value.problems == ["--set: device: Value error, must be auto, cpu, cuda or cuda:N (got 'gpu0')"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
@pytest.mark.timeout(120)
def test_generate_with_cuda_here_fails_with_one_line_before_loading():
    out = subprocess.run([sys.executable, "-m", "temper", "generate", "--prompt", "hi", "--device", "cuda",
                          "--model", "/nonexistent/model"], capture_output=True, text=True, timeout=100)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == ["error: runtime.device='cuda': CUDA is not available on this machine "
                                               "(torch.cuda.is_available() is False); use cpu or auto"]


@pytest.fixture(scope="module")
def peaked_folder(tmp_path_factory) -> Path:
    model, _ = tiny_pair(seed=0)
    return save_model(model, toy_tokenizer(), tmp_path_factory.mktemp("peaked") / "m")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine_kw", [{}, {"decode_buffer_bytes": 0}])
def test_device_cpu_end_to_end_gives_the_tokens_of_before(peaked_folder, engine_kw):
    loaded = load_model(peaked_folder, device=resolve_device("cpu"))
    engine = LLMEngine(loaded.model, None, EngineConfig(kv_budget_bytes=4 * 1024**2, block_size=4, **engine_kw))
    assert engine.device.type == "cpu" and not engine.runner.sdpa_decode
    assert {n: t.device.type for n, t in engine_tensors(engine).items()} == dict.fromkeys(engine_tensors(engine), "cpu")
    out = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True))
    assert [c.token_ids for c in out] == GREEDY
    out = engine.generate(PROMPTS, SamplingParams(temperature=1.0, max_tokens=6, ignore_eos=True, seed=1))
    assert [c.token_ids for c in out] == SAMPLED
    assert engine.runner.cascade_rows > 0  # the shared-prefix path ran too


@pytest.mark.timeout(120)
@pytest.mark.parametrize("engine_kw", [{}, {"decode_buffer_bytes": 0, "kv_dtype": "int8"},
                                       {"decode_buffer_bytes": 0, "kv_dtype": "int4"}])
def test_sdpa_decode_gives_the_tokens_of_the_cpu_path(peaked_folder, engine_kw):
    """The decode path CUDA takes (SDPA), run on the CPU: the same greedy tokens as the CPU's matmuls (torch
    ops: the C++ kernels are CPU-only and would take those rows). int4 takes its own greedy path (its rounding is
    coarse enough to move this tiny model's tokens): the two decode paths must still agree on it."""
    loaded = load_model(peaked_folder)
    calls, tokens = {}, {}
    for sdpa in (False, True):
        engine = LLMEngine(loaded.model, None, EngineConfig(kv_budget_bytes=4 * 1024**2, block_size=4,
                                                            cascade_attention=False, native_kernels="off",
                                                            **engine_kw))
        engine.runner.sdpa_decode = sdpa
        seen = TensorDevices()
        with seen:
            out = engine.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=8, ignore_eos=True))
        tokens[sdpa] = [c.token_ids for c in out]
        calls[sdpa] = seen.calls["scaled_dot_product_attention"]
    assert tokens[True] == tokens[False]
    assert engine_kw.get("kv_dtype") == "int4" or tokens[True] == GREEDY
    assert calls[True] >= calls[False] + 7 * 2  # every decode step of every layer went through SDPA


def test_block_gather_per_head_and_in_one_kernel_agree():
    src = torch.randn(3, 6, 4, 5)
    blocks = torch.tensor([4, 0, 4, 2])
    per_head, whole = torch.empty(3, 4, 4, 5), torch.empty(3, 4, 4, 5)
    select_blocks(src, blocks, per_head, per_head=True)
    select_blocks(src, blocks, whole, per_head=False)
    assert torch.equal(per_head, whole) and torch.equal(whole[1, 2], src[1, 4])
