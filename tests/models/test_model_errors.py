"""Bad input gives one clear line naming the file or name, and a non-zero exit; never a traceback."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_gguf import write_foreign_gguf

from temper.errors import TemperError
from temper.models import load_model, resolve_model

TEMPER = [sys.executable, "-m", "temper"]


def _truncated_model(src: Path, dst: Path) -> Path:
    """A copy of a model folder whose safetensors file is cut short."""
    dst.mkdir()
    for f in src.iterdir():
        data = f.read_bytes()
        (dst / f.name).write_bytes(data[: len(data) // 3] if f.suffix == ".safetensors" else data)
    return dst


@pytest.fixture
def bad_inputs(tmp_path, tiny_llama, smollm2_tokenizer):
    from temper.models import save_model

    good = save_model(tiny_llama(), smollm2_tokenizer, tmp_path / "good")
    return {
        "missing": (str(tmp_path / "nope"), "nope: no such file or folder"),
        "truncated": (str(_truncated_model(good, tmp_path / "cut")), "model.safetensors: not a readable safetensors"),
        "gguf-arch": (str(write_foreign_gguf(tmp_path / "gpt2.gguf")),
                      "gpt2.gguf: unsupported GGUF architecture 'gpt2'"),
        "unknown": ("no-such-model-xyz", "model 'no-such-model-xyz' is not a local folder or file, and the Hugging "
                                         "Face Hub cannot be reached (offline"),
    }


@pytest.mark.parametrize("case", ["missing", "truncated", "gguf-arch", "unknown"])
def test_api_raises_one_line(bad_inputs, case, monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TEMPER_HOME", str(tmp_path / "home"))
    name, message = bad_inputs[case]
    with pytest.raises(TemperError) as err:
        load_model(name)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("case", ["missing", "truncated", "gguf-arch", "unknown"])
def test_cli_exits_with_one_line(bad_inputs, case, tmp_path):
    name, message = bad_inputs[case]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TEMPER_HOME": str(tmp_path / "home"), "COLUMNS": "80"}
    proc = subprocess.run([*TEMPER, "generate", "--model", name, "--prompt", "hi"], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert message in lines[0] and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_folder_without_config_or_weights(tmp_path, tiny_llama):
    from temper.models import save_model

    (tmp_path / "empty").mkdir()
    with pytest.raises(TemperError, match=r"empty: not a model folder \(no config.json and no .gguf file\)"):
        resolve_model(tmp_path / "empty")
    folder = save_model(tiny_llama(), None, tmp_path / "noweights")
    (folder / "model.safetensors").unlink()
    with pytest.raises(TemperError, match="noweights: no safetensors weights"):
        load_model(folder)
    (folder / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    with pytest.raises(TemperError, match=r"config\.json: missing field 'num_attention_heads'"):
        load_model(folder)


def test_unsupported_architecture_in_config(tmp_path, tiny_llama, smollm2_tokenizer):
    from temper.models import save_model

    folder = save_model(tiny_llama(), smollm2_tokenizer, tmp_path / "m")
    text = (folder / "config.json").read_text().replace("LlamaForCausalLM", "GPT2LMHeadModel")
    (folder / "config.json").write_text(text)
    with pytest.raises(TemperError, match=r"config.json: unsupported architecture 'GPT2LMHeadModel'"):
        load_model(folder)


def test_weights_that_do_not_match_config(tmp_path, tiny_llama, smollm2_tokenizer):
    from temper.models import save_model

    folder = save_model(tiny_llama(), smollm2_tokenizer, tmp_path / "m")
    text = (folder / "config.json").read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": 3')
    (folder / "config.json").write_text(text)
    with pytest.raises(TemperError, match=r"weights do not match config.json \(missing \['model.layers.2"):
        load_model(folder)
