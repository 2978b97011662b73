"""Tools: schemas from signatures, argument checks, Hermes parsing, built-ins in the sandbox,
user tools and a multi-turn environment driven through the loop."""

import asyncio
from typing import Literal

from temper.agent import BUILTIN, AgentLoop, ToolContext, parse_tool_calls, tool
from temper.envs import Environment, Observation, Reward, StepResult, Task


@tool
async def lookup(word: str, senses: int = 3, style: Literal["short", "long"] = "short",
                 tags: list[str] | None = None) -> str:
    """Look a word up in the dictionary.

    More text that is not the description.

    Args:
        word: the word to look up
        senses: most senses to return
    """
    return f"{word}: {senses} {style} senses"


def test_schema_comes_from_the_signature_and_docstring() -> None:
    s = lookup.schema["function"]
    assert s["name"] == "lookup" and s["description"] == "Look a word up in the dictionary."
    props = s["parameters"]["properties"]
    assert props["word"] == {"type": "string", "description": "the word to look up"}
    assert props["senses"]["type"] == "integer" and props["style"]["enum"] == ["short", "long"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert s["parameters"]["required"] == ["word"]
    assert "ctx" not in BUILTIN["bash"].parameters["properties"] and BUILTIN["bash"].wants_ctx


def test_parsing_accepts_variants_and_explains_mistakes() -> None:
    tools = {"lookup": lookup}
    ok = parse_tool_calls('<tool_call>{"name": "lookup", "arguments": "{\\"word\\": \\"cat\\"}"}</tool_call>', tools)
    assert ok[0].error is None and ok[0].arguments == {"word": "cat"}  # OpenAI-style string arguments
    fenced = parse_tool_calls('<tool_call>\n```json\n{"name": "lookup", "arguments": {"word": "x"}}\n```\n</tool_call>',
                              tools)
    assert fenced[0].error is None
    unclosed = parse_tool_calls('<tool_call>{"name": "lookup", "arguments": {"word": "x"}}', tools)
    assert unclosed[0].error is None
    bad = parse_tool_calls('<tool_call>{"name": "lookup", "arguments": {"senses": "3", "color": 1}}</tool_call>'
                           '<tool_call>["lookup"]</tool_call><tool_call>{"name": "x"}</tool_call>', tools)
    assert "missing argument 'word'" in bad[0].error and "unknown argument 'color'" in bad[0].error
    assert "'senses' must be a integer" in bad[0].error and "expected: lookup(word: string" in bad[0].error
    assert 'needs a "name"' in bad[1].error and "unknown tool 'x'" in bad[2].error
    assert parse_tool_calls("no calls here", tools) == []


def test_builtin_tools_in_the_sandbox() -> None:
    from temper.envs import parse_spec

    suite = parse_spec("terminal")
    task = next(t for t in suite if t.payload["name"] == "text-word-count")

    async def go():
        async with suite.make_env(task) as env:
            await env.reset()
            ctx = ToolContext(env=env)
            assert (await BUILTIN["bash"](ctx, {"command": "wc -w < input.txt; echo oops >&2; exit 3"})) == \
                "exit code 3\n17\n[stderr]\noops"
            assert await BUILTIN["python"](ctx, {"code": "print(2 + 2)"}) == "exit code 0\n4"
            await BUILTIN["write_file"](ctx, {"path": "sub/new.txt", "content": "hello"})
            assert await BUILTIN["read_file"](ctx, {"path": "/app/sub/new.txt"}) == "hello"
            listing = await BUILTIN["list_files"](ctx, {"path": ".", "recursive": True})
            assert "input.txt" in listing and "sub/new.txt" in listing
            slow = await BUILTIN["bash"](ctx, {"command": "sleep 5", "timeout": 1})
            assert "wall time limit" in slow
            try:
                await BUILTIN["read_file"](ctx, {"path": "../../etc/passwd"})
            except Exception as exc:  # a ToolError: becomes an error observation
                assert type(exc).__name__ == "ToolError"
            else:
                raise AssertionError("path escape was allowed")
            # the interactive shell: one session, its directory, variables and jobs persist; Ctrl-C interrupts
            await BUILTIN["shell"](ctx, {"keys": "cd sub && export Y=7\n"})
            assert "/app/sub\n7\n" in await BUILTIN["shell"](ctx, {"keys": "pwd; echo $Y\n"})
            await BUILTIN["shell"](ctx, {"keys": "sleep 30\n", "wait": 0.3})
            assert "^C" in await BUILTIN["shell"](ctx, {"keys": "C-c"})
            assert "back\n" in await BUILTIN["shell"](ctx, {"keys": "echo back\n"})
            await BUILTIN["submit"](ctx, {"answer": "17"})
            assert ctx.state["submitted"] == "17"

    asyncio.run(go())


class GuessEnv(Environment):
    """A multi-turn environment: guess a number, told higher/lower, within the turn limit."""

    def __init__(self, secret: int) -> None:
        super().__init__(Task.make("guess", "games", "Guess my number between 1 and 10.", {"secret": secret}))
        self.secret, self.guesses = secret, 0

    async def reset(self) -> Observation:
        return Observation("Guess my number between 1 and 10. Answer with just a number.")

    async def step(self, action: str) -> StepResult:
        self.guesses += 1
        guess = int(action.strip())
        if guess == self.secret:
            return StepResult(reward=Reward(1.0 / self.guesses, {"guesses": self.guesses}), done=True)
        return StepResult(Observation("higher" if guess < self.secret else "lower"))


def test_multi_turn_environment_and_user_tool_through_the_loop(scripted, smollm2_tokenizer) -> None:
    client = scripted(['<tool_call>{"name": "lookup", "arguments": {"word": "hint"}}</tool_call>', "5", "8", "7"])
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer, tools=[lookup]).run(GuessEnv(7)))
    assert res.reward.value == 1 / 3 and res.reward.components == {"guesses": 3.0}
    transcript = smollm2_tokenizer.decode(res.trajectory.token_ids)
    assert "hint: 3 short senses" in transcript and "higher" in transcript and "lower" in transcript
    assert '"name": "lookup"' in transcript  # the user tool was offered in the system prompt


def test_reasoning_gym_with_the_python_tool(scripted, smollm2_tokenizer) -> None:
    from temper.envs import parse_spec

    suite = parse_spec("reasoning_gym:task=basic_arithmetic,n=1,seed=4,python=true")
    task = suite.tasks()[0]
    expr = task.payload["entry"]["metadata"]["expression"]
    code = f"print({expr})".replace('"', '\\"')
    client = scripted([f'<tool_call>{{"name": "python", "arguments": {{"code": "{code}"}}}}</tool_call>',
                       f'<tool_call>{{"name": "submit", "arguments": {{"answer": "{task.oracle}"}}}}</tool_call>'])
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(suite.make_env(task)))
    assert res.turns[0].tool_calls[0].output.startswith(f"exit code 0\n{task.oracle}")  # e.g. -204.0
    assert res.reward.value == 1.0
