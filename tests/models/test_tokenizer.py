"""The tokenizer: built from GGUF metadata, it encodes and decodes like transformers' tokenizer."""

import pytest
import transformers

from temper.models import Tokenizer
from temper.models.registry import BUNDLED

TEXTS = [
    "Hello world",
    " leading space and trailing ",
    "The year 2024 had 366 days; pi = 3.14159, 1234567890.",
    "naïve café — déjà vu 🤖 你好，世界 Привет мир",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "def f(x):\n    return x**2  # square\n\n\n",
    "tabs\tand\r\nCRLF\n\n  multiple   spaces  ",
    "I'm sure you're right; they'll say WE'VE done it.",
    "emoji 👍🏽 flags 🇫🇷 zero-width\u200bjoiner",
    "a<|endoftext|>b<repo_name>c",
    "",
]


@pytest.fixture(scope="module")
def gguf_pair():
    """(temper's tokenizer straight from the GGUF, transformers' tokenizer from the same GGUF)."""
    gguf = BUNDLED["smollm2-135m"].gguf_path("smollm2-135m")
    hf = transformers.AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    return Tokenizer.from_gguf(gguf), hf


@pytest.mark.e2e  # gguf_pair: transformers reads the whole SmolLM2 GGUF file (about a minute on 2 busy cores)
@pytest.mark.parametrize("text", TEXTS)
def test_gguf_tokenizer_matches_transformers(gguf_pair, text):
    ours, hf = gguf_pair
    ids = ours.encode(text)
    assert ids == hf.encode(text, add_special_tokens=False)
    assert ours.encode(text, add_special_tokens=True) == hf.encode(text, add_special_tokens=True)
    for skip in (True, False):
        assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)
    assert ours.decode(ids, skip_special_tokens=False) == text  # byte-level BPE is lossless


def test_special_tokens_of_smollm2(smollm2_tokenizer):
    tok = smollm2_tokenizer
    assert tok.vocab_size == 49152
    assert tok.eos_token_id == tok.token_to_id("<|im_end|>") == 2
    assert tok.eos_token_ids == {tok.token_to_id("<|im_end|>"), tok.token_to_id("<|endoftext|>")}
    assert tok.bos_token_id == tok.token_to_id("<|im_start|>")
    assert tok.pad_token_id == 2
    assert tok.encode("<|im_end|>") == [2]  # a special token in text stays one token
    assert tok.decode([2, 28, 2]) == tok.decode([28])  # and is dropped by skip_special_tokens
    assert tok.id_to_token(2) == "<|im_end|>"


@pytest.mark.e2e  # gguf_pair
def test_folder_and_gguf_tokenizers_agree(gguf_pair, smollm2_tokenizer):
    ours, _ = gguf_pair
    for text in TEXTS:
        assert smollm2_tokenizer.encode(text) == ours.encode(text)
    assert smollm2_tokenizer.chat_template == ours.chat_template
    assert smollm2_tokenizer.special_tokens_map == ours.special_tokens_map


def test_save_round_trip(smollm2_tokenizer, tmp_path):
    smollm2_tokenizer.save(tmp_path)
    again = Tokenizer.from_folder(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)
    msgs = [{"role": "user", "content": "2+2?"}]
    assert again.apply_chat_template(msgs, add_generation_prompt=True) == hf.apply_chat_template(
        msgs, add_generation_prompt=True, tokenize=False)
    for text in TEXTS:
        assert again.encode(text) == smollm2_tokenizer.encode(text) == hf.encode(text, add_special_tokens=False)
    assert hf.eos_token == "<|im_end|>" and hf.pad_token_id == 2


def test_generation_config_adds_stop_ids(smollm2_tokenizer, tmp_path):
    smollm2_tokenizer.save(tmp_path)
    (tmp_path / "generation_config.json").write_text('{"eos_token_id": [2, 5]}')
    assert Tokenizer.from_folder(tmp_path).eos_token_ids == {0, 2, 5}
