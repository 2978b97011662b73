"""The agent loop with a scripted GenerationClient: token bookkeeping, tools, malformed calls,
answer retries, fallbacks and infrastructure failures."""

import asyncio

from temper.agent import AgentConfig, AgentLoop
from temper.envs import parse_spec
from temper.episode_runner import run_episode
from temper.trajectory import FailureKind

TERMINAL_TURNS = [
    'Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "wc -w input.txt"}}\n</tool_call>',
    '<tool_call>{"name": "bash", "arguments": {"command": 5}}</tool_call> and <tool_call>{not json}</tool_call>',
    '<tool_call>{"name": "nope", "arguments": {}}</tool_call>',
    'Oops, no closing tag <tool_call>{"name": "write_file", "arguments": "{\\"path\\": \\"count.txt\\"',
    '<tool_call>{"name": "write_file", "arguments": {"path": "count.txt", "content": "17\\n"}}</tool_call>',
    '<tool_call>{"name": "submit", "arguments": {}}</tool_call>',
]


def _terminal_task(name: str):
    suite = parse_spec("terminal")
    return suite, next(t for t in suite if t.payload["name"] == name)


def test_terminal_episode_survives_malformed_calls_and_records_tokens(scripted, smollm2_tokenizer) -> None:
    tok = smollm2_tokenizer
    suite, task = _terminal_task("text-word-count")
    client = scripted(TERMINAL_TURNS)
    res = asyncio.run(AgentLoop(client, tok).run(suite.make_env(task)))
    assert res.failure is None and res.reward.value == 1.0 and len(res.turns) == 6
    errors = [c.output for t in res.turns for c in t.tool_calls if c.error]
    assert any("must be a string" in e for e in errors) and any("not valid JSON" in e for e in errors)
    assert any("unknown tool 'nope'" in e for e in errors)
    tr = res.trajectory
    # loss mask: exactly the scripted model tokens, in order, with their logprobs and versions
    spans, cur = [], []
    for i, m in enumerate(tr.loss_mask):
        if m:
            cur.append(i)
        elif cur:
            spans.append(cur)
            cur = []
    spans.append(cur)
    assert len(spans) == 6
    for k, (span, text) in enumerate(zip(spans, TERMINAL_TURNS, strict=True)):
        assert [tr.token_ids[i] for i in span] == [*tok.encode(text), tok.token_to_id("<|im_end|>")]
        assert {tr.versions[i] for i in span} == {3 + k + 1} and {tr.logprobs[i] for i in span} == {-0.5}
    assert all(v == -1 and lp == 0.0 for v, lp, m in zip(tr.versions, tr.logprobs, tr.loss_mask, strict=True) if not m)
    # every request was the exact token sequence so far (nothing re-tokenized)
    for ids, _ in client.requests:
        assert tr.token_ids[: len(ids)] == ids
    # the ids decode to the conversation as the chat template renders it
    rendered = tok.apply_chat_template(res.messages)
    assert tok.decode(tr.token_ids, skip_special_tokens=False) == rendered.removesuffix("\n")
    assert tr.task_id == task.id and tr.reward == 1.0 and tr.timings["total_s"] > 0 and tr.info["prefix_len"] > 0


def test_single_turn_answer_retry_with_hint_then_reward(scripted, smollm2_tokenizer) -> None:
    suite = parse_spec("reasoning_gym:task=basic_arithmetic,n=1,seed=1")
    task = suite.tasks()[0]
    client = scripted(["Let me think.\nIt is a subtraction\nof numbers.", f"<answer>{task.oracle}</answer>"])
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(suite.make_env(task)))
    assert res.reward.value == 1.0 and len(res.turns) == 2
    assert "<answer>" in smollm2_tokenizer.decode(client.requests[1][0])  # the hint reached the model
    assert res.reward.components == {"correctness": 1.0, "format": 1.0}


def test_a_seeded_episode_gives_each_turn_a_seed_of_its_own(scripted, smollm2_tokenizer) -> None:
    suite = parse_spec("reasoning_gym:task=basic_arithmetic,n=1,seed=1")
    task = suite.tasks()[0]
    client = scripted(["Let me think.\nIt is a subtraction\nof numbers.", f"<answer>{task.oracle}</answer>"])
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(suite.make_env(task), seed=1234))
    assert len(res.turns) == 2 and [p.seed for _, p in client.requests] == [1234, 1235]


def test_repeated_failures_get_a_fallback_hint_then_end_the_episode(scripted, smollm2_tokenizer) -> None:
    suite, task = _terminal_task("text-word-count")
    client = scripted(["<tool_call>{broken</tool_call>"] * 10)
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer, AgentConfig(max_consecutive_errors=2)).run(
        suite.make_env(task)))
    assert len(res.turns) == 4 and res.failure is None and res.reward.value == 0.0  # scored, not crashed
    assert "Your last 2 turns failed" in smollm2_tokenizer.decode(client.requests[2][0])


def test_out_of_turns_is_truncated_and_still_verified(scripted, smollm2_tokenizer) -> None:
    suite, task = _terminal_task("text-word-count")
    turns = ['<tool_call>{"name": "bash", "arguments": {"command": "wc -w < input.txt > count.txt"}}</tool_call>'] * 5
    res = asyncio.run(AgentLoop(scripted(turns), smollm2_tokenizer, AgentConfig(max_turns=2)).run(suite.make_env(task)))
    assert len(res.turns) == 2 and res.trajectory.truncated and res.failure is None and res.reward.value == 1.0


def test_sandbox_killed_mid_episode_is_an_infrastructure_failure(scripted, smollm2_tokenizer) -> None:
    import os
    import signal

    suite, task = _terminal_task("text-word-count")
    env = suite.make_env(task)
    client = scripted(['<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'] * 3)
    original = client.generate

    async def generate(ids, params):
        if len(client.requests) == 1:  # before the second turn, the sandbox dies
            os.killpg(env.sandbox._sup._proc.pid, signal.SIGKILL)
        return await original(ids, params)

    client.generate = generate
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(env))
    assert res.failure == FailureKind.SANDBOX_CRASH and not res.trajectory.trainable
    assert len(res.turns) == 2 and "sandbox crashed during bash" in res.reward.info["error"]


def test_engine_errors_and_timeouts_are_infrastructure_failures(scripted, smollm2_tokenizer) -> None:
    suite = parse_spec("longctx:task=niah,length=200,n=1,haystack=generated")
    task = suite.tasks()[0]

    class Broken:
        async def generate(self, ids, params):
            raise RuntimeError("engine went away")

    class Slow:
        async def generate(self, ids, params):
            await asyncio.sleep(5)

    res = asyncio.run(AgentLoop(Broken(), smollm2_tokenizer).run(suite.make_env(task)))
    assert res.failure == FailureKind.ENGINE_ERROR and res.trajectory.failure == FailureKind.ENGINE_ERROR
    slow = AgentLoop(Slow(), smollm2_tokenizer, AgentConfig(turn_timeout_s=0.2))
    assert asyncio.run(slow.run(suite.make_env(task))).failure == FailureKind.HARNESS_TIMEOUT


def test_many_episodes_concurrently_in_groups(scripted, smollm2_tokenizer) -> None:
    suite = parse_spec("reasoning_gym:task=chain_sum,n=4,seed=2")
    answers = [f"<answer>{t.oracle}</answer>" for t in suite for _ in range(3)]
    client = scripted(answers)

    async def group(t):  # n=3 episodes of a task at once, sharing its group id
        return await asyncio.gather(*(run_episode(client, smollm2_tokenizer, suite, t, None, AgentConfig(),
                                                  episode_id=str(k)) for k in range(3)))

    # the scripted client answers in call order; one task at a time keeps answers and tasks aligned
    results = []
    for t in suite:
        results += asyncio.run(group(t))
    assert [r.reward.value for r in results] == [1.0] * 12
    assert len({r.trajectory.group_id for r in results}) == 4 and len({r.trajectory.id for r in results}) == 12


def test_sandboxed_episodes_run_concurrently(scripted, smollm2_tokenizer) -> None:
    suite, task = _terminal_task("text-word-count")
    work = ('<tool_call>{"name": "bash", "arguments": {"command": "date +%s.%N; sleep 2; date +%s.%N; '
            'wc -w < input.txt > count.txt"}}</tool_call>')
    client = scripted([])
    scripted_generate = client.generate

    async def generate(ids, params):  # each episode: do the work, then submit once it has run
        done = "exit code" in smollm2_tokenizer.decode(ids[-200:])
        client.turns = ['<tool_call>{"name": "submit", "arguments": {}}</tool_call>' if done else work]
        return await scripted_generate(ids, params)

    client.generate = generate

    async def eight():
        return await asyncio.gather(*(run_episode(client, smollm2_tokenizer, suite, task, None, AgentConfig(),
                                                  episode_id=str(k)) for k in range(8)))

    results = asyncio.run(eight())
    assert [r.reward.value for r in results] == [1.0] * 8 and all(len(r.turns) == 2 for r in results)
    # the commands' own clocks: how many were sleeping at the same moment (timing-independent)
    spans = [tuple(map(float, r.turns[0].tool_calls[0].output.split()[3:5])) for r in results]
    most = max(sum(a <= t < b for a, b in spans) for t, _ in spans)
    assert most >= 4, spans


def test_a_template_that_renders_tools_itself(scripted, smollm2_tokenizer) -> None:
    """Qwen2.5's template renders the `tools` schema and wraps tool results in <tool_response>:
    the loop hands it the tools instead of writing them into the system prompt, and the ids
    still decode to exactly what the template renders."""
    from pathlib import Path

    from temper.models import Tokenizer

    qwen = Tokenizer(smollm2_tokenizer.backend, smollm2_tokenizer.config)
    qwen.chat_template = (Path(__file__).parents[1] / "models" / "data" / "qwen2_5_chat_template.jinja").read_text()
    suite, task = _terminal_task("text-word-count")
    turns = ['<tool_call>\n{"name": "bash", "arguments": {"command": "wc -w < input.txt > count.txt"}}\n</tool_call>\n'
             '<tool_call>\n{"name": "bash", "arguments": {"command": "cat count.txt"}}\n</tool_call>',
             '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>']
    client = scripted(turns)  # same vocabulary: the scripted ids are valid for both
    res = asyncio.run(AgentLoop(client, qwen).run(suite.make_env(task)))
    assert res.reward.value == 1.0
    text = qwen.decode(res.trajectory.token_ids, skip_special_tokens=False)
    assert text == qwen.apply_chat_template(res.messages, tools=[t.schema for t in _offered(task, suite)]).rstrip("\n")
    system = text[: text.index("<|im_start|>user")]
    assert system.count('"name": "bash"') == 1  # the template's own tools block, not a second one of ours
    assert "<tool_response>\nexit code 0\n17\n</tool_response>" in text


def _offered(task, suite):
    from temper.agent import BUILTIN

    return [BUILTIN[n] for n in suite.make_env(task).tools]

