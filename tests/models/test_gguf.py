"""GGUF files: dequantized, renamed, q/k un-permuted, tokenizer rebuilt, cached once, atomically."""

import gguf
import pytest
import torch
from tiny_gguf import tiny_vocab, write_tiny_gguf

from temper.errors import TemperError
from temper.models import load_model, resolve_model
from temper.models import registry as registry_module


@pytest.fixture(autouse=True)
def temper_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TEMPER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_f32_gguf_loads_to_identical_logits(tiny_llama, tmp_path, arch):
    model = tiny_llama(arch, vocab_size=len(tiny_vocab()), tie_word_embeddings=arch != "qwen2")
    path = write_tiny_gguf(tmp_path / f"tiny-{arch}.gguf", model, arch=arch)
    loaded = load_model(path)
    assert loaded.config.architecture == model.config.architecture
    ids = torch.randint(0, len(tiny_vocab()), (30,))
    with torch.no_grad():
        assert torch.allclose(model.logits(ids), loaded.model.logits(ids), atol=1e-6)


def test_quantized_gguf_is_dequantized(tiny_llama, tmp_path):
    model = tiny_llama("llama", vocab_size=len(tiny_vocab()))
    path = write_tiny_gguf(tmp_path / "q8.gguf", model, qtype=gguf.GGMLQuantizationType.Q8_0)
    loaded = load_model(path)
    ids = torch.randint(0, len(tiny_vocab()), (30,))
    with torch.no_grad():
        want, got = model.logits(ids), loaded.model.logits(ids)
    assert not torch.equal(want, got)  # quantization changed the weights a little...
    assert (want - got).abs().max() < 0.05 * want.abs().max()  # ...but not the model


def test_gguf_tokenizer_and_template(tiny_llama, tmp_path):
    path = write_tiny_gguf(tmp_path / "t.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    tok = load_model(path).tokenizer
    ids = tok.encode("hello world<|im_end|>")
    assert [tok.id_to_token(i) for i in ids] == ["hello", "Ġworld", "<|im_end|>"]
    assert tok.decode(ids) == "hello world"
    assert tok.eos_token_id == 2 and tok.bos_token_id == 1 and tok.eos_token_ids == {0, 2}
    assert tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True) == \
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_conversion_is_cached(tiny_llama, tmp_path, temper_home, monkeypatch):
    path = write_tiny_gguf(tmp_path / "c.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    first = resolve_model(path)
    assert first.parent == temper_home / "models" and (first / "model.safetensors").is_file()
    monkeypatch.setattr(registry_module, "convert_gguf", lambda *a: pytest.fail("converted twice"))
    assert resolve_model(path) == first


def test_interrupted_conversion_leaves_no_half_folder(tiny_llama, tmp_path, temper_home, monkeypatch):
    path = write_tiny_gguf(tmp_path / "k.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    real = registry_module.convert_gguf

    def killed(gguf_path, folder):
        (folder / "config.json").write_text("{}")  # a partial write...
        raise KeyboardInterrupt  # ...then the process is interrupted

    monkeypatch.setattr(registry_module, "convert_gguf", killed)
    with pytest.raises(KeyboardInterrupt):
        resolve_model(path)
    left = [p.name for p in (temper_home / "models").iterdir() if p.suffix != ".lock"]
    assert left == []  # neither a half model nor a temp folder (the lock file stays, free)
    monkeypatch.setattr(registry_module, "convert_gguf", real)
    assert (resolve_model(path) / "model.safetensors").is_file()


def test_stale_conversion_is_rebuilt(tiny_llama, tmp_path, monkeypatch):
    path = write_tiny_gguf(tmp_path / "s.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    folder = resolve_model(path)
    monkeypatch.setattr(registry_module, "CONVERSION_VERSION", registry_module.CONVERSION_VERSION + 1)
    calls = []
    real = registry_module.convert_gguf
    monkeypatch.setattr(registry_module, "convert_gguf", lambda *a: (calls.append(a), real(*a)))
    assert resolve_model(path) == folder and len(calls) == 1


def test_unsupported_tokenizer_type(tiny_llama, tmp_path):
    path = write_tiny_gguf(tmp_path / "u.gguf", tiny_llama("llama", vocab_size=len(tiny_vocab())))
    reader_fields = gguf.GGUFReader(path).fields
    assert reader_fields["tokenizer.ggml.model"].contents() == "gpt2"
    bad = path.read_bytes().replace(b"smollm", b"nosuch")  # same length: a pre-tokenizer we do not know
    (tmp_path / "bad.gguf").write_bytes(bad)
    with pytest.raises(TemperError, match=r"bad\.gguf: pre-tokenizer 'nosuch' is not supported"):
        resolve_model(tmp_path / "bad.gguf")
