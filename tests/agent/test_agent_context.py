"""Context management: the token budget holds over a 50-turn episode with huge tool outputs;
old outputs are trimmed head+tail, old turns summarised, the task restated, the system kept first."""

import asyncio

from temper.agent import AgentConfig, AgentLoop, ContextConfig, ContextManager, TurnNote, extractive_summary
from temper.agent.chat_format import ChatFormat
from temper.envs import parse_spec

BUDGET = 2048


def test_budget_never_exceeded_over_50_turns(scripted, smollm2_tokenizer) -> None:
    tok = smollm2_tokenizer
    suite = parse_spec("terminal")
    task = next(t for t in suite if t.payload["name"] == "text-word-count")
    call = '<tool_call>{"name": "bash", "arguments": {"command": "seq 1 %d"}}</tool_call>'
    client = scripted([call % (500 + 37 * i) for i in range(60)])
    cfg = AgentConfig(max_turns=50, max_context_tokens=BUDGET, max_turn_tokens=64,
                      context=ContextConfig(max_observation_tokens=300, keep_recent_turns=2))
    res = asyncio.run(AgentLoop(client, tok, cfg).run(suite.make_env(task)))

    assert len(res.turns) == 50 and res.failure is None and res.trajectories[-1].truncated
    for ids, params in client.requests:
        assert len(ids) + params.max_tokens <= BUDGET
    assert all(len(t.token_ids) <= BUDGET for t in res.trajectories)
    assert len(res.trajectories) > 3  # compacted into new windows several times
    texts = [tok.decode(ids, skip_special_tokens=False) for ids, _ in client.requests]
    assert any("characters cut" in t for t in texts)  # head+tail trimming of long outputs
    assert any("Summary of your earlier turns" in t for t in texts)
    assert any("Reminder of your task" in t for t in texts)
    # every window starts with the same system layer (a shared, cacheable prefix) and the task
    p = res.trajectories[0].info["prefix_len"]
    assert all(t.token_ids[:p] == res.trajectories[0].token_ids[:p] for t in res.trajectories)
    assert all("Count the words" in tok.decode(t.token_ids) for t in res.trajectories)
    assert sum(t.num_model_tokens for t in res.trajectories) == sum(r.model_tokens for r in res.turns)


def test_trim_keeps_head_and_tail(smollm2_tokenizer) -> None:
    ctx = ContextManager(ChatFormat(smollm2_tokenizer), 4096)
    text = "\n".join(f"line {i}" for i in range(1000))
    out = ctx.trim(text, 100)
    assert out.startswith("line 0\nline 1") and out.rstrip().endswith("line 999") and "characters cut" in out
    assert ctx.tokens(out) <= 110 and ctx.trim("short", 100) == "short"


def test_extractive_and_custom_summaries(scripted, smollm2_tokenizer) -> None:
    notes = [TurnNote("I will list files", ["bash({'command': 'ls'})"], "exit code 0\na.txt"),
             TurnNote("Thinking about it.\nMore.")]
    s = asyncio.run(extractive_summary(notes))
    assert s.splitlines() == ["- turn 1: bash({'command': 'ls'}) -> exit code 0", "- turn 2: Thinking about it."]

    seen = []

    async def summarizer(turns):
        seen.append(len(turns))
        return "CUSTOM SUMMARY"

    suite = parse_spec("terminal")
    task = next(t for t in suite if t.payload["name"] == "text-word-count")
    client = scripted(['<tool_call>{"name": "bash", "arguments": {"command": "seq 1 3000"}}</tool_call>'] * 12)
    cfg = AgentConfig(max_turns=12, max_context_tokens=BUDGET, context=ContextConfig(max_observation_tokens=400))
    asyncio.run(AgentLoop(client, smollm2_tokenizer, cfg, summarizer=summarizer).run(suite.make_env(task)))
    assert seen and any("CUSTOM SUMMARY" in smollm2_tokenizer.decode(ids) for ids, _ in client.requests)
