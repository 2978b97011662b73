"""The OpenAI API of `temper serve`, through the official `openai` client against a live server
on a tiny random model: chat, completions, streaming, logprobs, token ids, variants, errors, metrics."""

import json

import httpx
import openai
import pytest
from serve_helpers import metric

from temper.engine import EngineConfig, LLMEngine
from temper.generation import SamplingParams
from temper.models import load_model

pytestmark = pytest.mark.e2e

LONG = ("The quick brown fox jumps over the lazy dog while the cat watches from the garden wall. " * 8).strip()


def test_models_and_health(live):
    ids = [m.id for m in live.client().models.list().data]
    assert ids == ["tiny", "tiny:fast", "tiny:auto"]
    health = httpx.get(f"{live.url}/health").json()
    assert health["status"] == "ok" and health["policy_version"] == 0


def test_chat_completion(live):
    raw = live.client().chat.completions.with_raw_response.create(
        model="tiny", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}],
        max_tokens=8, temperature=0)
    assert raw.headers["x-variant"] == "standard"
    out = raw.parse()
    assert out.object == "chat.completion" and out.model == "tiny"
    choice = out.choices[0]
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    assert out.usage.completion_tokens <= 8 and out.usage.prompt_tokens > 5


def test_completion_token_ids_and_logprobs_match_the_engine(live, tiny_model_dir):
    prompt = [1, 504, 2113, 314, 260, 3529, 30]
    out = live.client().completions.create(model="tiny", prompt=prompt, max_tokens=6, temperature=0, logprobs=2,
                                           extra_body={"return_token_ids": True})
    choice = out.choices[0]
    extra = choice.model_extra
    assert extra["prompt_token_ids"] == prompt and len(extra["token_ids"]) == 6
    assert extra["versions"] == [0] * 6 and extra["policy_version"] == 0
    assert len(choice.logprobs.token_logprobs) == 6 and all(len(t) == 2 for t in choice.logprobs.top_logprobs)
    # The same quantity as the in-process engine's, for the same tokens.
    loaded = load_model(tiny_model_dir)
    ref = LLMEngine(loaded.model, loaded.tokenizer, EngineConfig(kv_budget_bytes=16 * 1024**2)).generate(
        prompt, SamplingParams(temperature=0, max_tokens=6))[0]
    assert extra["token_ids"] == ref.token_ids
    assert extra["token_logprobs"] == pytest.approx(ref.logprobs, abs=1e-4)
    assert choice.logprobs.token_logprobs == pytest.approx(ref.logprobs, abs=1e-4)


def test_streaming_equals_the_plain_answer_and_ends_with_usage(live):
    client = live.client()
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Count with me: one two three"}], max_tokens=12,
              temperature=0)
    whole = client.chat.completions.create(**kw).choices[0].message.content
    chunks = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] in ("stop", "length")
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    stream = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=6, temperature=0,
                                       stream=True)
    plain = client.completions.create(model="tiny", prompt="Once upon a time", max_tokens=6, temperature=0)
    assert "".join(c.choices[0].text for c in stream if c.choices) == plain.choices[0].text


def test_n_seed_and_stop(live):
    client = live.client()
    kw = dict(model="tiny", prompt="Pick a word:", max_tokens=5, temperature=1.0, n=3, seed=7)
    a, b = client.completions.create(**kw), client.completions.create(**kw)
    assert [c.index for c in a.choices] == [0, 1, 2]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]  # seeded: reproducible
    greedy = client.completions.create(model="tiny", prompt="The weather today", max_tokens=16, temperature=0)
    text = greedy.choices[0].text
    assert len(text) >= 4
    stop = text[2:4]
    cut = client.completions.create(model="tiny", prompt="The weather today", max_tokens=16, temperature=0,
                                    stop=[stop])
    assert cut.choices[0].text == text[:text.find(stop)] and cut.choices[0].finish_reason == "stop"


def test_fast_variant_is_greedy_identical_and_speculates(live):
    client = live.client()
    before = metric(httpx.get(f"{live.url}/metrics").text, "temper_engine_accepted_draft_tokens_total")
    for prompt in ["alpha beta gamma alpha beta gamma alpha", "Hello, hello, hello", LONG[:200]]:
        kw = dict(prompt=prompt, max_tokens=24, temperature=0)
        std = client.completions.create(model="tiny", **kw)
        raw = client.completions.with_raw_response.create(model="tiny:fast", **kw)
        assert raw.headers["x-variant"] == "fast"
        assert raw.parse().choices[0].text == std.choices[0].text
    after = metric(httpx.get(f"{live.url}/metrics").text, "temper_engine_accepted_draft_tokens_total")
    assert after > before  # drafts were proposed and accepted


def test_auto_routes_by_hints_and_sampling(live):
    client = live.client()
    raw = client.completions.with_raw_response.create(model="tiny:auto", prompt="def f(x):", max_tokens=4,
                                                      temperature=0, extra_headers={"X-Task-Type": "code"})
    assert (raw.headers["x-variant"], raw.headers["x-route-reason"]) == ("fast", "task:code")
    raw = client.completions.with_raw_response.create(model="tiny:auto", prompt="def f(x):", max_tokens=4,
                                                      temperature=0.7, extra_body={"task_type": "code"})
    assert (raw.headers["x-variant"], raw.headers["x-route-reason"]) == ("standard", "sampled")


def test_repeated_prompt_hits_the_prefix_cache(live):
    client = live.client()
    msgs = [{"role": "system", "content": LONG}, {"role": "user", "content": "Summarise."}]
    client.chat.completions.create(model="tiny", messages=msgs, max_tokens=2, temperature=0)
    again = client.chat.completions.create(model="tiny", messages=msgs, max_tokens=2, temperature=0)
    assert again.usage.prompt_tokens > 128
    assert again.usage.prompt_tokens_details.cached_tokens >= 64


@pytest.mark.parametrize(("body", "param"), [
    ({"temperature": -1}, "temperature"),
    ({"top_p": 0}, "top_p"),
    ({"n": 0}, "n"),
    ({"max_tokens": 0}, "max_tokens"),
    ({"prompt": [99999999]}, "prompt"),
    ({"prompt": list(range(10, 700))}, "prompt"),  # longer than the context (512)
    ({"prompt": []}, "prompt"),
    ({"stop": [""]}, "stop"),
    ({"extra_body": {"top_k": -3}}, "top_k"),
])
def test_invalid_completion_requests_are_400_naming_the_field(live, body, param):
    with pytest.raises(openai.BadRequestError) as err:
        live.client().completions.create(**{"model": "tiny", "prompt": "hi", **body})
    assert err.value.status_code == 400
    assert err.value.body["param"] == param, err.value.body
    assert err.value.body["type"] == "invalid_request_error"


def test_invalid_chat_requests_and_unknown_model(live):
    client = live.client()
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=[{"role": "wizard", "content": "x"}])
    assert err.value.body["param"] == "messages.0.role"
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=[])
    assert err.value.body["param"] == "messages"
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "x"}])
    assert err.value.body["param"] == "model" and "tiny:fast" in err.value.body["message"]
    bad = httpx.post(f"{live.url}/v1/chat/completions", content=b"{not json",
                     headers={"content-type": "application/json"})
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    # The server is still fine after all of that.
    assert client.completions.create(model="tiny", prompt="ok", max_tokens=2).choices


def test_metrics_and_usage_records_redact_content(live):
    client = live.client(api_key="sk-secret-abcdefghijklmnopqrstuvwx")
    client.chat.completions.create(model="tiny", max_tokens=3, messages=[
        {"role": "user", "content": "Mail jane.doe@example.com, card 4111 1111 1111 1111, "
                                    "key sk-live1234567890abcdefXYZ"}])
    text = httpx.get(f"{live.url}/metrics").text
    assert metric(text, "temper_serve_requests_total", variant="standard", endpoint="chat", status="ok") >= 1
    assert "temper_serve_time_to_first_token_seconds_bucket" in text
    assert "temper_serve_request_latency_seconds_bucket" in text
    assert metric(text, "temper_serve_cost_usd_total", variant="standard") > 0
    assert metric(text, "temper_serve_tokens_total", variant="standard", kind="completion") > 0
    raw = (live.tmp / "usage.jsonl").read_text()
    records = [json.loads(line) for line in raw.splitlines()]
    last = [r for r in records if r["endpoint"] == "chat" and r["status"] == "ok"][-1]
    for field in ("variant", "prompt_tokens", "completion_tokens", "cached_prompt_tokens", "ttft_s", "latency_s",
                  "tokens_per_s", "cost_usd", "status"):
        assert field in last, field
    assert "jane.doe@example.com" not in raw and "4111 1111" not in raw and "sk-live123" not in raw
    assert "sk-secret" not in raw  # API keys are named by a hash only
    assert "[EMAIL]" in raw and "[CARD]" in raw and "[SECRET]" in raw
    assert any(r["status"] == "rejected" and r["http_status"] == 400 for r in records)
