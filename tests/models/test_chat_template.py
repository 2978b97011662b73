"""Chat templates render exactly as transformers' `apply_chat_template` renders them."""

from pathlib import Path

import pytest
import transformers

from temper.errors import TemperError
from temper.models import Tokenizer

DATA = Path(__file__).parent / "data"
QWEN = (DATA / "qwen2_5_chat_template.jinja").read_text()
FEATURES = (DATA / "features_chat_template.jinja").read_text()

CHATS = {
    "one-turn": [{"role": "user", "content": "What is the capital of France?"}],
    "system": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    "multi-turn": [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "Tell me a joke about ünïcode 🤖."},
    ],
}
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City <name>"}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "add", "description": "Add two numbers.",
                                      "parameters": {"type": "object", "properties": {
                                          "a": {"type": "number"}, "b": {"type": "number"}}}}},
]
TOOL_CHAT = [
    {"role": "user", "content": "Weather in Paris, and 2+3?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
        {"type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 3}}}]},
    {"role": "tool", "content": '{"temp_c": 18}'},
    {"role": "tool", "content": "5"},
    {"role": "assistant", "content": "It is 18°C in Paris, and 2+3=5."},
    {"role": "user", "content": "Thanks"},
]


@pytest.fixture(scope="module")
def hf_tokenizer(smollm2_path):
    return transformers.AutoTokenizer.from_pretrained(smollm2_path)


def _with_template(tok: Tokenizer, template: str) -> Tokenizer:
    copy = Tokenizer(tok.backend, tok.config)
    copy.chat_template = template
    return copy


@pytest.mark.parametrize("chat", CHATS)
@pytest.mark.parametrize("add_generation_prompt", [False, True])
def test_smollm2_template_matches_transformers(smollm2_tokenizer, hf_tokenizer, chat, add_generation_prompt):
    msgs = CHATS[chat]
    want = hf_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=add_generation_prompt)
    assert smollm2_tokenizer.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt) == want
    ids = hf_tokenizer.apply_chat_template(msgs, tokenize=True, return_dict=False,
                                           add_generation_prompt=add_generation_prompt)
    assert smollm2_tokenizer.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt,
                                                 tokenize=True) == list(ids)


@pytest.mark.parametrize("chat", [*CHATS, "tools"])
@pytest.mark.parametrize("with_tools", [False, True])
def test_qwen_template_matches_transformers(smollm2_tokenizer, hf_tokenizer, chat, with_tools):
    msgs = TOOL_CHAT if chat == "tools" else CHATS[chat]
    tools = TOOLS if with_tools else None
    want = hf_tokenizer.apply_chat_template(msgs, tools=tools, chat_template=QWEN, tokenize=False,
                                            add_generation_prompt=True)
    got = _with_template(smollm2_tokenizer, QWEN).apply_chat_template(msgs, tools=tools, add_generation_prompt=True)
    assert got == want
    assert ("<tools>" in got) == with_tools


def test_template_helpers_match_transformers(smollm2_tokenizer, hf_tokenizer):
    msgs = [
        {"role": "user", "content": "a", "meta": {"z": 1, "a": [1, 2]}},
        {"role": "skip", "content": "hidden"},
        {"role": "assistant", "content": "b", "reasoning_content": "hmm"},
        {"role": "stop", "content": "end"},
        {"role": "user", "content": "never shown"},
    ]
    tok = _with_template(smollm2_tokenizer, FEATURES)
    for kwargs in ({}, {"enable_thinking": True}):
        want = hf_tokenizer.apply_chat_template(msgs, chat_template=FEATURES, tokenize=False,
                                                add_generation_prompt=True, **kwargs)
        assert tok.apply_chat_template(msgs, add_generation_prompt=True, **kwargs) == want
    with pytest.raises(TemperError, match="chat template: no messages"):
        tok.apply_chat_template([])


def test_template_errors_are_one_line(smollm2_tokenizer):
    with pytest.raises(TemperError, match="syntax error on line 1"):
        _with_template(smollm2_tokenizer, "{% for m in messages %}").apply_chat_template([])
    no_template = _with_template(smollm2_tokenizer, "")
    no_template.chat_template = None
    with pytest.raises(TemperError, match="no chat template"):
        no_template.apply_chat_template([{"role": "user", "content": "x"}])


def test_sandbox_blocks_escapes(smollm2_tokenizer):
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(TemperError, match="chat template"):
        _with_template(smollm2_tokenizer, evil).apply_chat_template([{"role": "user", "content": "x"}])
