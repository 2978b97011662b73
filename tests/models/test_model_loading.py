"""Loading the bundled model and tiny models; the fixtures other test suites build on."""


import pytest
import torch

from temper.models import LlamaForCausalLM, generate_reference, load_model, save_model


@pytest.mark.slow
@pytest.mark.e2e
def test_bundled_smollm2_loads_and_answers(smollm2):
    assert isinstance(smollm2.model, LlamaForCausalLM) and not smollm2.model.training
    assert smollm2.config.num_hidden_layers == 30 and smollm2.config.vocab_size == 49152
    assert (smollm2.path / "model.safetensors").is_file()
    tok = smollm2.tokenizer
    ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                  add_generation_prompt=True, tokenize=True)
    out = generate_reference(smollm2.model, ids, max_new_tokens=12, eos_ids=tok.eos_token_ids)
    assert "Paris" in tok.decode(out)


@pytest.mark.slow
@pytest.mark.e2e
def test_a_cached_model_loads_without_converting_again(smollm2_path):
    """The second load finds the converted folder: nothing in it is written again (a timing bound here failed
    on a loaded CI machine; what makes it fast is that no conversion runs)."""
    before = {p: p.stat().st_mtime_ns for p in smollm2_path.rglob("*") if p.is_file()}
    loaded = load_model("smollm2-135m")
    assert loaded.path == smollm2_path
    assert {p: p.stat().st_mtime_ns for p in smollm2_path.rglob("*") if p.is_file()} == before


def test_tiny_model_saves_and_loads(tiny_llama, smollm2_tokenizer, tmp_path):
    model = tiny_llama("qwen2")
    save_model(model, smollm2_tokenizer, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    ids = torch.tensor(smollm2_tokenizer.encode("Hello there, tiny model."))
    with torch.no_grad():
        assert torch.equal(model.logits(ids), loaded.model.logits(ids))
    assert loaded.tokenizer.encode("abc 123") == smollm2_tokenizer.encode("abc 123")


def test_hub_id_resolves_from_the_local_hf_cache(tiny_llama, smollm2_tokenizer, tmp_path, monkeypatch):
    """A Hub id already in the Hugging Face cache loads offline, through huggingface_hub."""
    import huggingface_hub.constants

    snapshot = tmp_path / "hub" / "models--someone--tiny" / "snapshots" / ("0" * 40)
    save_model(tiny_llama(), smollm2_tokenizer, snapshot)
    (tmp_path / "hub" / "models--someone--tiny" / "refs").mkdir()
    (tmp_path / "hub" / "models--someone--tiny" / "refs" / "main").write_text("0" * 40)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_model("someone/tiny").path == snapshot


def test_bfloat16_load_keeps_rope_in_fp32(tiny_llama, smollm2_tokenizer, tmp_path):
    folder = save_model(tiny_llama(), smollm2_tokenizer, tmp_path / "m")
    model = load_model(folder, dtype=torch.bfloat16).model
    assert model.model.embed_tokens.weight.dtype == torch.bfloat16
    assert model.model.rotary.inv_freq.dtype == torch.float32
    assert model.lm_head.weight is model.model.embed_tokens.weight  # still tied
    with torch.no_grad():
        assert model.logits(torch.tensor([1, 2, 3])).dtype == torch.bfloat16
