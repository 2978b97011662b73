"""Anthropic's Messages API on temper serve, through the official `anthropic` client:
text with a system prompt, streaming events, tool use and tool results."""

import anthropic
import pytest

pytestmark = pytest.mark.e2e

TOOLS = [{"name": "now", "description": "The current time.", "input_schema": {"type": "object", "properties": {}}}]


def anthropic_client(srv) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=srv.url, api_key="sk-test-key", max_retries=0)


def test_a_message_equals_the_chat_answer(live):
    msg = anthropic_client(live).messages.create(model="tiny", max_tokens=8, system="Be brief.",
                                                 extra_body={"temperature": 0},
                                                 messages=[{"role": "user", "content": "Name a colour."}])
    chat = live.client().chat.completions.create(model="tiny", max_tokens=8, temperature=0, messages=[
        {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a colour."}])
    assert msg.type == "message" and msg.role == "assistant" and msg.content[0].type == "text"
    assert msg.content[0].text == chat.choices[0].message.content
    assert msg.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[chat.choices[0].finish_reason]
    assert (msg.usage.input_tokens, msg.usage.output_tokens) == (chat.usage.prompt_tokens, chat.usage.completion_tokens)


def test_streaming_events_rebuild_the_message(live):
    client = anthropic_client(live)
    kw = dict(model="tiny", max_tokens=10, extra_body={"temperature": 0},  # this client has no temperature argument
              messages=[{"role": "user", "content": "Count: one two"}])
    with client.messages.stream(**kw) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_message()
    plain = client.messages.create(**kw)
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop" and kinds.count("content_block_delta") > 1
    assert final.content[0].text == plain.content[0].text and final.stop_reason == plain.stop_reason
    assert final.usage.output_tokens == plain.usage.output_tokens


def test_tool_use_blocks_and_tool_results(tool_server):
    client = anthropic_client(tool_server)
    msg = client.messages.create(model="tiny", max_tokens=32, extra_body={"temperature": 0}, tools=TOOLS,
                                 messages=[{"role": "user", "content": "What time is it?"}])
    (use,) = [b for b in msg.content if b.type == "tool_use"]
    assert use.name == "now" and use.input == {} and msg.stop_reason == "tool_use"
    follow = client.messages.create(model="tiny", max_tokens=4, extra_body={"temperature": 0}, tools=TOOLS, messages=[
        {"role": "user", "content": "What time is it?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": "now", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "12:00"}]}])
    assert follow.usage.input_tokens > msg.usage.input_tokens
    with client.messages.stream(model="tiny", max_tokens=32, extra_body={"temperature": 0}, tools=TOOLS,
                                messages=[{"role": "user", "content": "Time?"}]) as stream:
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["tool_use"] and final.content[0].name == "now"
