"""Fixtures of the serve tests: tiny model folders (with the SmolLM2 tokenizer) and one live
server on the tiny model shared by a test module."""

from pathlib import Path

import pytest
from serve_helpers import LiveServer, scripted_folder, serve_config, tiny_folder


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


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory: pytest.TempPathFactory, smollm2_tokenizer):
    """A tiny scripted model that, after the generation prompt's last token ("\n" of "assistant\n"),
    writes a call to the tool `now`."""
    tmp = tmp_path_factory.mktemp("tools")
    folder = scripted_folder(tmp / "model", smollm2_tokenizer, after="assistant\n", text='<tool_call>{"name": "now"}')
    with LiveServer(serve_config(folder, tmp)) as srv:
        yield srv
