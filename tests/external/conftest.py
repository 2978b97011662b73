"""Fixtures for external agent programs: a terminal task folder, a real engine on a tiny random model
with SmolLM2's tokenizer, and a writer for agent programs (Python files run with this interpreter)."""

import sys
import textwrap

import pytest
import torch
from external_helpers import task_folder


@pytest.fixture
def terminal_suite(tmp_path):
    from temper.envs import parse_spec

    return parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks')}")


@pytest.fixture(scope="module")
def tiny_engine(smollm2_tokenizer):
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
def program(tmp_path):
    """program(source) -> argv running that Python source (dedented) with this interpreter."""
    def write(source: str, name: str = "agent.py") -> list[str]:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return [sys.executable, str(path)]

    return write
