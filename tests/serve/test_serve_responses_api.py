"""OpenAI's Responses API on temper serve, through the official client's `responses`:
text and message input, instructions, previous_response_id, streaming events, function calls as
output items, usage, and OpenAI-style errors."""

import json

import httpx
import openai
import pytest

pytestmark = pytest.mark.e2e

TOOLS = [{"type": "function", "name": "now", "description": "The current time.",
          "parameters": {"type": "object", "properties": {}}}]


def test_text_input_instructions_and_usage_equal_the_chat_answer(live):
    client = live.client()
    r = client.responses.create(model="tiny", input="Name a colour.", instructions="Be brief.", max_output_tokens=8,
                                temperature=0)
    chat = client.chat.completions.create(model="tiny", max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}])
    assert r.object == "response" and r.id.startswith("resp_") and r.status in ("completed", "incomplete")
    assert r.output_text == chat.choices[0].message.content  # the same conversation, the same greedy answer
    assert r.usage.input_tokens == chat.usage.prompt_tokens and r.usage.output_tokens == chat.usage.completion_tokens
    assert client.responses.retrieve(r.id).output_text == r.output_text


def test_previous_response_id_carries_the_conversation(live):
    client = live.client()
    first = client.responses.create(model="tiny", input=[{"role": "user", "content": "Hello there"}],
                                    max_output_tokens=4, temperature=0)
    second = client.responses.create(model="tiny", input="And again?", previous_response_id=first.id,
                                     max_output_tokens=4, temperature=0)
    # the second prompt is exactly the whole conversation: the first turn, its answer, the new turn
    conversation = [{"role": "user", "content": "Hello there"}, {"role": "assistant", "content": first.output_text},
                    {"role": "user", "content": "And again?"}]
    whole = httpx.post(f"{live.url}/tokenize", json={"messages": conversation}).json()["count"]
    assert first.output_text and second.usage.input_tokens == whole
    with pytest.raises(openai.NotFoundError, match="previous_response_id"):
        client.responses.create(model="tiny", input="x", previous_response_id="resp_nope")


def test_streaming_follows_the_documented_event_sequence(live):
    client = live.client()
    events = list(client.responses.create(model="tiny", input="Count: one two", max_output_tokens=10, temperature=0,
                                          stream=True))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] in ("response.completed", "response.incomplete")
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert len(deltas) > 1  # token by token, not one piece
    plain = client.responses.create(model="tiny", input="Count: one two", max_output_tokens=10, temperature=0)
    assert "".join(deltas) == plain.output_text == events[-1].response.output_text
    order = [k for k in kinds if k not in ("response.output_text.delta",)]
    assert order[2:6] == ["response.output_item.added", "response.content_part.added", "response.output_text.done",
                          "response.content_part.done"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.usage.output_tokens == plain.usage.output_tokens


def test_function_calls_are_output_items_and_their_outputs_go_back(tool_server):
    client = tool_server.client()
    r = client.responses.create(model="tiny", input="What time is it?", tools=TOOLS, temperature=0,
                                max_output_tokens=32)
    (call,) = [it for it in r.output if it.type == "function_call"]
    assert call.name == "now" and json.loads(call.arguments) == {} and call.call_id.startswith("call_")
    follow = client.responses.create(model="tiny", previous_response_id=r.id, tools=TOOLS, temperature=0,
                                     max_output_tokens=4, input=[{"type": "function_call_output",
                                                                  "call_id": call.call_id, "output": "12:00"}])
    assert follow.usage.input_tokens > r.usage.input_tokens  # the call and its output are in the prompt
    events = list(client.responses.create(model="tiny", input="Time?", tools=TOOLS, temperature=0,
                                          max_output_tokens=32, stream=True))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [it.type for it in done] == ["function_call"] and done[0].name == "now"
