"""Structured outputs through `temper serve` and the official clients: response_format json_schema
(strict) and json_object, tool_choice required and named, vLLM's structured_outputs, the Responses
API's text.format and the Messages API's tool_choice; in the standard and the fast variant; a bad
constraint is a 400 naming its field."""

import asyncio
import json
import re

import anthropic
import jsonschema
import openai
import pytest
from serve_helpers import LiveServer, serve_config

pytestmark = pytest.mark.e2e

SMALL = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "color"],
         "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9},
                        "color": {"enum": ["red", "green", "blue"]}}}
PERSON = {"type": "object", "additionalProperties": False, "required": ["name", "age", "hobbies"],
          # {0,1}, not ?: xgrammar 0.2.8 loses the {1,15} bound before a `(...)?` group
          "properties": {"name": {"type": "string", "pattern": "^[A-Z][a-z]{1,15}( [A-Z][a-z]{1,15}){0,1}$"},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "hobbies": {"type": "array", "maxItems": 3,
                                     "items": {"type": "string", "pattern": "^[a-z ]{1,20}$"}}}}
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The current weather in a city.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["city"],
                   "properties": {"city": {"type": "string", "maxLength": 40}}}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a timezone.",
    "parameters": {"type": "object", "additionalProperties": False, "required": ["tz"],
                   "properties": {"tz": {"enum": ["UTC", "CET"]}}}}}
USER = [{"role": "user", "content": "hello"}]


def _schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "thing", "schema": schema, "strict": True}}


@pytest.mark.parametrize("model", ["tiny", "tiny:fast"])
def test_json_schema_streamed_and_not_on_both_variants(live, model):
    client = live.client()
    for seed in range(3):
        r = client.chat.completions.create(model=model, messages=USER, temperature=1.0, seed=seed, max_tokens=60,
                                           response_format=_schema_format(SMALL))
        jsonschema.validate(json.loads(r.choices[0].message.content), SMALL)
        assert r.choices[0].finish_reason == "stop"
    stream = client.chat.completions.create(model=model, messages=USER, temperature=0, max_tokens=60, stream=True,
                                            response_format=_schema_format(SMALL))
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    jsonschema.validate(json.loads(text), SMALL)


def test_greedy_constrained_output_is_the_same_on_the_fast_variant(live):
    client = live.client()
    kw = dict(messages=USER, temperature=0, max_tokens=60, response_format=_schema_format(SMALL))
    std = client.chat.completions.create(model="tiny", **kw).choices[0].message.content
    assert client.chat.completions.create(model="tiny:fast", **kw).choices[0].message.content == std


def test_json_object_and_vllm_structured_outputs_on_completions(live):
    client = live.client()
    r = client.chat.completions.create(model="tiny", messages=USER, temperature=0, max_tokens=40,
                                       response_format={"type": "json_object"})
    assert r.choices[0].finish_reason == "length" or isinstance(json.loads(r.choices[0].message.content), dict)
    assert r.choices[0].message.content.startswith("{")
    for so, check in [({"regex": r"[a-c]{3}-[0-9]{2}"}, lambda t: re.fullmatch(r"[a-c]{3}-[0-9]{2}", t)),
                      ({"choice": ["yes", "no"]}, lambda t: t in ("yes", "no")),
                      ({"json": SMALL}, lambda t: jsonschema.validate(json.loads(t), SMALL) is None),
                      ({"grammar": 'root ::= "x" [0-9] [0-9]'}, lambda t: re.fullmatch(r"x[0-9]{2}", t))]:
        out = client.completions.create(model="tiny", prompt="go", max_tokens=40, seed=1,
                                        extra_body={"structured_outputs": so})
        assert check(out.choices[0].text), (so, out.choices[0].text)


def test_named_tool_choice_calls_that_tool(live):
    client = live.client()
    for seed in range(3):
        r = client.chat.completions.create(
            model="tiny", messages=USER, tools=[WEATHER, TIME], temperature=1.0, seed=seed, max_tokens=150,
            tool_choice={"type": "function", "function": {"name": "get_time"}})
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and len(choice.message.tool_calls) == 1
        call = choice.message.tool_calls[0].function
        assert call.name == "get_time" and json.loads(call.arguments)["tz"] in ("UTC", "CET")


def test_bad_constraints_are_400s_naming_the_field(live):
    client = live.client()
    cases = [
        (dict(tools=[WEATHER], tool_choice={"type": "function", "function": {"name": "nope"}}), "tool_choice",
         "no tool named 'nope'"),
        (dict(tool_choice="required"), "tool_choice", "needs tools"),
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x"}}), "response_format.json_schema",
         "schema is required"),
        (dict(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "bogus"}}}),
         "response_format", "cannot compile"),
        (dict(response_format={"type": "json_object"}, extra_body={"structured_outputs": {"regex": "a"}}),
         "structured_outputs", "not both"),
        (dict(extra_body={"structured_outputs": {"regex": "a", "choice": ["b"]}}), "structured_outputs",
         "exactly one of"),
    ]
    for kw, param, words in cases:
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="tiny", messages=USER, max_tokens=5, **kw)
        assert err.value.body["param"] == param and words in err.value.body["message"], (kw, err.value.body)
    assert client.chat.completions.create(model="tiny", messages=USER, max_tokens=2).choices  # still serving


def test_responses_text_format_and_messages_tool_choice(live):
    client = live.client()
    r = client.responses.create(model="tiny", input="hello", temperature=1.0, max_output_tokens=60,
                                text={"format": {"type": "json_schema", "name": "thing", "schema": SMALL,
                                                 "strict": True}})
    jsonschema.validate(json.loads(r.output_text), SMALL)
    assert r.text.format.type == "json_schema"
    forced = client.responses.create(model="tiny", input="hello", max_output_tokens=60, tool_choice="required",
                                     tools=[{"type": "function", **TIME["function"]}])
    assert [it.type for it in forced.output] == ["function_call"] and forced.output[0].name == "get_time"
    msg = anthropic.Anthropic(base_url=live.url, api_key="x").messages.create(
        model="tiny", max_tokens=60, messages=[{"role": "user", "content": "hello"}],
        tools=[{"name": "get_time", "description": "the time", "input_schema": TIME["function"]["parameters"]}],
        tool_choice={"type": "any"})
    assert msg.stop_reason == "tool_use" and msg.content[-1].type == "tool_use"
    assert msg.content[-1].input["tz"] in ("UTC", "CET")


@pytest.fixture(scope="module")
def smollm2_server(smollm2_path, tmp_path_factory):
    with LiveServer(serve_config(smollm2_path, tmp_path_factory.mktemp("smol"), served_name="smollm2")) as srv:
        yield srv


async def _many(srv: LiveServer, n: int, **kw) -> list:
    client = openai.AsyncOpenAI(base_url=f"{srv.url}/v1", api_key="x", max_retries=0)
    try:
        return await asyncio.gather(*(client.chat.completions.create(model="smollm2", seed=s, temperature=1.0, **kw)
                                      for s in range(n)))
    finally:
        await client.close()


@pytest.mark.slow
def test_a_json_schema_holds_for_20_seeds_at_temperature_1(smollm2_server):
    outs = asyncio.run(_many(smollm2_server, 20, max_tokens=200, response_format=_schema_format(PERSON), messages=[
        {"role": "user", "content": "Invent a person: their name, age and hobbies, as JSON."}]))
    for r in outs:
        assert r.choices[0].finish_reason == "stop", r.choices[0].message.content
        jsonschema.validate(json.loads(r.choices[0].message.content), PERSON)
    assert len({r.choices[0].message.content for r in outs}) > 5  # sampled at T=1, not one forced answer


@pytest.mark.slow
def test_tool_choice_required_always_yields_a_tool_call(smollm2_server):
    outs = asyncio.run(_many(smollm2_server, 10, max_tokens=120, tools=[WEATHER, TIME], tool_choice="required",
                             messages=[{"role": "user", "content": "Tell me a joke about cats."}]))
    for r in outs:
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.tool_calls, choice.message
        for call in choice.message.tool_calls:
            tool = {"get_weather": WEATHER, "get_time": TIME}[call.function.name]
            jsonschema.validate(json.loads(call.function.arguments), tool["function"]["parameters"])
    # unforced, the same question gets no tool call: the constraint made the calls
    free = asyncio.run(_many(smollm2_server, 3, max_tokens=40, tools=[WEATHER, TIME],
                             messages=[{"role": "user", "content": "Tell me a joke about cats."}]))
    assert any(not r.choices[0].message.tool_calls for r in free)


def test_vllm_token_route_takes_structured_outputs(live):
    import httpx

    body = {"token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 20, "seed": 0, "logprobs": 0,
                                                        "structured_outputs": {"choice": ["left", "right"]}}}
    r = httpx.post(f"{live.url}/inference/v1/generate", json=body, timeout=60)
    assert r.status_code == 200, r.text
    ids = r.json()["choices"][0]["token_ids"]
    text = httpx.post(f"{live.url}/detokenize", json={"tokens": ids}, timeout=60).json()["prompt"]
    assert text.replace("<|im_end|>", "") in ("left", "right")
    body["sampling_params"]["structured_outputs"] = {"choice": []}
    bad = httpx.post(f"{live.url}/inference/v1/generate", json=body, timeout=60)
    assert bad.status_code == 400 and "structured_outputs.choice" in bad.json()["error"]["message"]
