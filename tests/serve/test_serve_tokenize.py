"""vLLM's tokenizer routes on temper serve: /tokenize (text, and chat messages rendered as
/v1/chat/completions renders them), /detokenize, /tokenizer_info."""

import httpx
import pytest

from temper.models import Tokenizer

pytestmark = pytest.mark.e2e


def test_tokenize_a_text_prompt_as_completions_encode_it(live, tiny_model_dir):
    tok = Tokenizer.from_folder(tiny_model_dir)
    r = httpx.post(f"{live.url}/tokenize", json={"model": "tiny", "prompt": "The cat sat", "return_token_strs": True})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tokens"] == tok.encode("The cat sat", add_special_tokens=True) and body["count"] == len(body["tokens"])
    assert body["max_model_len"] == 512 and "".join(body["token_strs"]).replace("Ġ", " ").endswith("The cat sat")
    plain = httpx.post(f"{live.url}/tokenize", json={"prompt": "The cat sat", "add_special_tokens": False}).json()
    assert plain["tokens"] == tok.encode("The cat sat")


def test_tokenized_messages_are_what_a_chat_completion_is_given(live):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}]
    ids = httpx.post(f"{live.url}/tokenize", json={"model": "tiny", "messages": messages}).json()["tokens"]
    done = live.client().chat.completions.create(model="tiny", messages=messages, max_tokens=2)
    assert done.usage.prompt_tokens == len(ids)  # the same template, the same ids
    without = httpx.post(f"{live.url}/tokenize", json={"messages": messages, "add_generation_prompt": False}).json()
    assert 0 < without["count"] < len(ids) and ids[:without["count"]] == without["tokens"]


def test_detokenize_round_trips_and_names_a_bad_id(live, tiny_model_dir):
    ids = httpx.post(f"{live.url}/tokenize", json={"prompt": "hello world", "add_special_tokens": False}).json()
    r = httpx.post(f"{live.url}/detokenize", json={"tokens": ids["tokens"]})
    assert r.json() == {"prompt": "hello world"}
    bad = httpx.post(f"{live.url}/detokenize", json={"tokens": [1, 10**9]})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("tokens[1]=1000000000")
    other = httpx.post(f"{live.url}/tokenize", json={"model": "nope", "prompt": "x"})
    assert other.status_code == 404 and other.json()["error"]["code"] == "model_not_found"
    neither = httpx.post(f"{live.url}/tokenize", json={"model": "tiny"})
    assert neither.status_code == 400 and "exactly one of prompt and messages" in neither.json()["error"]["message"]


def test_tokenizer_info_has_the_special_tokens_and_the_template(live, tiny_model_dir):
    tok = Tokenizer.from_folder(tiny_model_dir)
    info = httpx.get(f"{live.url}/tokenizer_info").json()
    assert info["eos_token"] == tok.config["eos_token"] and info["chat_template"] == tok.chat_template
    assert info["tokenizer_class"] and info["model_max_length"]
