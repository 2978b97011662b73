"""Shared test set-up: offline, one torch thread, deterministic."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

torch.set_num_threads(1)


# ---- models: the real bundled SmolLM2 and tiny random Llama-family models ----------------
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The converted SmolLM2-135M-Instruct folder. The GGUF is converted once into the stable
    cache ($TEMPER_HOME or ~/.cache/temper, ~10-40 s); later runs find it there."""
    from temper.models import resolve_model

    return resolve_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2(smollm2_path: Path):
    """LoadedModel of the real bundled SmolLM2 (fp32, eval). Tests using it are `@pytest.mark.slow`."""
    from temper.models import load_model

    return load_model(smollm2_path)


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_path: Path):
    from temper.models import Tokenizer

    return Tokenizer.from_folder(smollm2_path)


@pytest.fixture(scope="module")
def tiny_engine(smollm2_tokenizer):
    """A real engine on a tiny random Llama with SmolLM2's tokenizer (episodes whose text does not matter)."""
    from temper.engine import AsyncEngine, EngineConfig, LLMEngine
    from temper.models import LlamaForCausalLM, ModelConfig

    torch.manual_seed(0)
    cfg = ModelConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                      rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
                      architecture="LlamaForCausalLM", model_type="llama")
    engine = AsyncEngine(LLMEngine(LlamaForCausalLM(cfg).eval(), smollm2_tokenizer,
                                   EngineConfig(block_size=16, kv_budget_bytes=64 * 1024**2)))
    yield engine
    engine.close()


@pytest.fixture
def tiny_llama() -> Callable[..., "torch.nn.Module"]:
    """Factory: `tiny_llama(arch="llama", seed=0, **config_overrides)` -> a random tiny
    LlamaForCausalLM in eval mode. Its vocabulary (49152) fits the SmolLM2 tokenizer."""
    from temper.models import LlamaForCausalLM, ModelConfig

    def make(arch: str = "llama", seed: int = 0, **overrides) -> LlamaForCausalLM:
        traits = {
            "llama": {"architecture": "LlamaForCausalLM", "model_type": "llama"},
            "mistral": {"architecture": "MistralForCausalLM", "model_type": "mistral", "sliding_window": 16},
            "qwen2": {"architecture": "Qwen2ForCausalLM", "model_type": "qwen2", "attention_bias": True},
            "qwen3": {"architecture": "Qwen3ForCausalLM", "model_type": "qwen3", "qk_norm": True},
        }[arch]
        sizes = dict(
            vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
            rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
        )
        cfg = ModelConfig(**{**sizes, **traits, **overrides})
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()

    return make


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Test files with the most slow tests first (the order is otherwise kept): scripts/test.sh hands
    whole files to two workers in this order, and a long file started last would leave one idle."""
    slow: dict[str, int] = {}
    for item in items:
        slow[item.path.as_posix()] = slow.get(item.path.as_posix(), 0) + bool(item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path.as_posix()])  # stable: within a file, the written order


# ---- the working tree: a test run writes nothing into the repository's runs/ ----------------------
import subprocess  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _runs_entries() -> set[str]:
    """`git status` of runs/, one line per file, ignored ones included (runs/ is in .gitignore)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "runs/"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):  # no git: nothing to compare
        return set()
    return set(out.stdout.splitlines()) if out.returncode == 0 else set()


@pytest.fixture(scope="session", autouse=True)
def _sandbox_audit_logs_under_tmp(tmp_path_factory: pytest.TempPathFactory):
    """A sandbox made with the default config appends its audit log to runs/sandbox/ of the current folder,
    the repository in a test run: in this process a relative run_dir lands under a temporary folder instead.
    (Commands a test starts in its own process are given --out / run_dir under tmp_path by the test.)"""
    from temper.sandbox.config import SandboxConfig

    base = tmp_path_factory.mktemp("relative-run-dirs")
    real = SandboxConfig.audit_path
    SandboxConfig.audit_path = property(lambda cfg: real.fget(cfg) if Path(cfg.run_dir).is_absolute()
                                        else base / real.fget(cfg))
    yield
    SandboxConfig.audit_path = real


@pytest.fixture(scope="session", autouse=True)
def _nothing_written_into_runs():
    """Fails the session when it added files under the repository's runs/ (two `git status` calls in all)."""
    before = _runs_entries()
    yield
    added = sorted(_runs_entries() - before)
    if added:
        pytest.fail("the tests wrote into the repository's runs/ (write under tmp_path instead): "
                    + ", ".join(line[3:] for line in added[:10]), pytrace=False)
