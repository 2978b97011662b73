"""Tools through the chat template and `tool_calls` parsed from the model's Hermes-style output,
against a tiny scripted model that answers with a tool call (through the openai client)."""

import json

import pytest

pytestmark = pytest.mark.e2e

TOOLS = [{"type": "function", "function": {"name": "now", "description": "The current time.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def test_tool_calls_are_parsed(tool_server):
    client = tool_server.client()
    out = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "What time is it?"}],
                                         tools=TOOLS, temperature=0, max_tokens=32)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "now" and json.loads(call.function.arguments) == {}
    assert call.id.startswith("call_") and choice.message.content is None
    # The tools reached the prompt (this template has no tools section: the Hermes block goes in the system turn).
    plain = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "What time is it?"}],
                                           temperature=0, max_tokens=32)
    assert out.usage.prompt_tokens > plain.usage.prompt_tokens + 20
    assert plain.choices[0].message.tool_calls is None and "<tool_call>" in plain.choices[0].message.content


def test_tool_calls_stream_and_the_conversation_continues(tool_server):
    client = tool_server.client()
    chunks = list(client.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Time?"}], tools=TOOLS, temperature=0, max_tokens=32,
        stream=True))
    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.name for tc in calls] == ["now"]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    # The client runs the tool and sends the result back: the assistant turn with tool_calls and a tool message render.
    follow = client.chat.completions.create(model="tiny", tools=TOOLS, temperature=0, max_tokens=8, messages=[
        {"role": "user", "content": "Time?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": calls[0].id, "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": calls[0].id, "content": "12:00"}])
    assert follow.choices[0].finish_reason in ("tool_calls", "stop", "length")


def test_tool_choice_none_offers_no_tools(tool_server):
    out = tool_server.client().chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Time?"}], tools=TOOLS, tool_choice="none",
        temperature=0, max_tokens=32)
    assert out.choices[0].message.tool_calls is None
