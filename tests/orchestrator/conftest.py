"""The tiny recipe: a ~20k-parameter random chat model learns to copy a digit ('say 1' -> '1')
with GRPO in ~30 steps (seconds each). Suites are `toy` specs; `sandbox=true` runs the verifier
in a sandbox (fault injection kills those)."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from temper.models.toy import make_toy_model

    return make_toy_model(tmp_path_factory.mktemp("toy") / "model")
