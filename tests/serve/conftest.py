"""Fixtures of the serve tests: tiny model folders (with the SmolLM2 tokenizer) and one live
server on the tiny model shared by a test module."""

from pathlib import Path

import pytest
from serve_helpers import LiveServer, serve_config, tiny_folder


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer) -> Path:
    return tiny_folder(tmp_path_factory.mktemp("tiny0") / "tiny", smollm2_tokenizer, seed=0)


@pytest.fixture(scope="session")
def tiny_model_dir_b(tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer) -> Path:
    """Other random weights of the same shapes (for load_weights)."""
    return tiny_folder(tmp_path_factory.mktemp("tiny1") / "tiny", smollm2_tokenizer, seed=1)


@pytest.fixture(scope="module")
def live(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("serve")
    with LiveServer(serve_config(tiny_model_dir, tmp, **{"usage.log_content": True})) as srv:
        srv.tmp = tmp
        yield srv
