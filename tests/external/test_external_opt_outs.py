"""An external program cannot opt an episode out of its 0, nor sample the policy under a grammar unseen:
a sandbox command it leaves running (past the episode's end, or after it exits) is killed by the
episode's end and never makes the verifier wait (which would mask the episode as harness_timeout); a
crash after it has called the model is the episode's 0 (info.program_crashed); the shipped harness
ends cleanly on an HTTP 400; a constrained request is refused with a 400 naming its field, or, with
agent.constrained_requests=mark, sampled and flagged so that the trainer keeps it out of the loss.
Each attack beside its control, the same program without it."""

import asyncio
import sys
import time
from pathlib import Path

import openai
import pytest
from external_helpers import task_folder

from temper.agent.config import AgentConfig
from temper.envs import parse_spec
from temper.episode_runner import run_episode
from temper.external.endpoint import EpisodeEndpoint, EpisodeState
from temper.generation import Completion, SamplingParams
from temper.rl.config import FilterConfig
from temper.rl.filtering import filter_trajectories
from temper.trajectory import FailureKind

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]

CLIENT = """
import json, os, sys, threading, time
import httpx, openai
client = openai.OpenAI(max_retries=0)
key = os.environ["OPENAI_API_KEY"]
def run(cmd, timeout=60):
    r = httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": cmd, "timeout": timeout},
                   headers={"Authorization": f"Bearer {key}"}, timeout=None)
    r.raise_for_status()
    return r.json()
client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
"""


def _agent(argv: list[str], **over) -> AgentConfig:
    return AgentConfig(**{"kind": "external", "command": argv, "max_turn_tokens": 12, **over})


def _run(client, tokenizer, suite, cfg):
    (task,) = suite.tasks()
    return asyncio.run(run_episode(client, tokenizer, suite, task, None, cfg, 0))


# -- sandbox commands never outlive the episode, and the verifier never waits on one -----------------------
LEFT_RUNNING = {
    # the program is killed at the episode's end (8 s) while its /exec sleeps on in the sandbox
    "past_the_episode": 'run("sleep 90", timeout=90)\n',
    # the program starts an /exec and exits at once, leaving the command to the sandbox
    "after_the_program_exits": 'threading.Thread(target=run, args=("sleep 90", 90), daemon=True).start()\n'
                               'time.sleep(1)\nprint("bye")\nos._exit(0)\n',
}


@pytest.mark.parametrize("attack", sorted(LEFT_RUNNING))
def test_a_command_left_running_is_the_agents_time_not_a_masked_verifier(tiny_engine, smollm2_tokenizer, program,
                                                                         tmp_path, attack):
    suite = parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks', agent_timeout_s=8, verifier_timeout_s=4)}")
    start = time.monotonic()
    res = _run(tiny_engine, smollm2_tokenizer, suite, _agent(program(CLIENT + LEFT_RUNNING[attack])))
    assert res.failure is None and res.reward.value == 0.0, res.reward  # scored, not harness_timeout
    assert res.trajectories and all(t.trainable for t in res.trajectories)
    assert time.monotonic() - start < 45  # the command was killed by the episode's end (8 s), not at 90 s
    if attack == "after_the_program_exits":  # killed when the program exited, not at the episode's end
        assert all(t.info.get("exec_interrupted") for t in res.trajectories), res.trajectories[0].info
    # the control is the same task without the 8 s agent limit: on a loaded machine (CI's 2 workers) a program's
    # start and first model call can use up 8 s, and its exec then gets no time left (reward 0, not the attack's)
    roomy = parse_spec(f"terminal:path={task_folder(tmp_path / 'control', verifier_timeout_s=4)}")
    control = _run(tiny_engine, smollm2_tokenizer, roomy,
                   _agent(program(CLIENT + 'run("echo ok > /app/done.txt")\n', "control.py")))
    assert control.failure is None and control.reward.value == 1.0, (control.reward, control.trajectories[0].info)


# -- a crash after calling the model is the episode's 0 ----------------------------------------------------
def test_a_crash_after_calling_the_model_is_a_zero_not_masked(tiny_engine, smollm2_tokenizer, program, tmp_path):
    suite = parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks')}")
    crash = _run(tiny_engine, smollm2_tokenizer, suite,
                 _agent(program(CLIENT + 'run("echo ok > /app/done.txt")\nraise RuntimeError("about to fail")\n')))
    assert crash.failure is None and crash.reward.value == 0.0 and crash.reward.info["program_crashed"]
    assert "about to fail" in crash.reward.info["error"]
    assert crash.trajectories and all(t.trainable and t.info["program_crashed"] for t in crash.trajectories)
    # controls: the same program that exits cleanly is scored; one that never reached the model stays masked
    ok = _run(tiny_engine, smollm2_tokenizer, suite, _agent(program(CLIENT + 'run("echo ok > /app/done.txt")\n')))
    assert ok.failure is None and ok.reward.value == 1.0 and "program_crashed" not in ok.trajectories[0].info
    missing = _run(tiny_engine, smollm2_tokenizer, suite, _agent([str(tmp_path / "no-such-agent")]))
    assert missing.failure == FailureKind.AGENT_PROGRAM and not missing.trajectories


# -- the shipped harness ends cleanly on an HTTP 400 --------------------------------------------------------
class ToolCaller:
    """A GenerationClient whose policy calls bash("seq 1 2000") once, then answers "done"."""

    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        self.calls += 1
        text = ('<tool_call>\n{"name": "bash", "arguments": {"command": "seq 1 2000"}}\n</tool_call>'
                if self.calls == 1 else "done")
        ids = self.tokenizer.encode(text)
        return Completion("s", 0, list(token_ids), token_ids=ids, text=text, logprobs=[-0.5] * len(ids),
                          versions=[0] * len(ids), finish_reason="stop")


def test_the_openai_tools_example_ends_cleanly_when_the_context_is_full(smollm2_tokenizer, tmp_path):
    """Its second call (the tool's long output) no longer fits agent.max_context_tokens: the endpoint answers
    400, and the harness stops with what it has (exit 0, scored), where it used to crash (masked)."""
    suite = parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks')}")
    argv = [sys.executable, str(ROOT / "examples" / "agents" / "openai_tools.py")]
    full = _run(ToolCaller(smollm2_tokenizer), smollm2_tokenizer, suite, _agent(argv, max_context_tokens=1024))
    info = full.trajectories[0].info
    assert full.failure is None and full.reward.value == 0.0, full.reward
    assert info["program"]["exit_code"] == 0 and "context" in info["program"]["stderr_tail"], info["program"]
    roomy = _run(ToolCaller(smollm2_tokenizer), smollm2_tokenizer, suite, _agent(argv, max_context_tokens=8192))
    assert roomy.failure is None and roomy.trajectories[0].info["calls"] == 2  # control: two calls, then "done"


# -- constrained requests -----------------------------------------------------------------------------------
class Spy:
    def __init__(self, tokenizer):
        self.tokenizer, self.seen = tokenizer, []

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        self.seen.append(params)
        ids = self.tokenizer.encode('{"a": 1}')
        return Completion("spy", 0, list(token_ids), token_ids=ids, text='{"a": 1}', logprobs=[-0.5] * len(ids),
                          versions=[0] * len(ids), finish_reason="stop")


TOOL = {"type": "function", "function": {"name": "bash", "description": "Run a command.", "parameters": {
    "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
HI = [{"role": "user", "content": "hi"}]
CONSTRAINED = {
    "response_format": lambda c: c.chat.completions.create(model="x", messages=HI,
                                                           response_format={"type": "json_object"}),
    "tool_choice": lambda c: c.chat.completions.create(model="x", messages=HI, tools=[TOOL], tool_choice="required"),
    "tool_choice (named)": lambda c: c.chat.completions.create(
        model="x", messages=HI, tools=[TOOL], tool_choice={"type": "function", "function": {"name": "bash"}}),
    "structured_outputs": lambda c: c.completions.create(model="x", prompt="hi",
                                                         extra_body={"structured_outputs": {"regex": "[ab]+"}}),
    "text.format": lambda c: c.responses.create(model="x", input="hi", text={"format": {"type": "json_object"}}),
}


def test_a_constrained_request_is_refused_naming_its_field(smollm2_tokenizer):
    agent = AgentConfig(kind="external", command=["true"], max_turn_tokens=20)
    st = EpisodeState(Spy(smollm2_tokenizer), smollm2_tokenizer, None, agent, seed=0)

    async def main():
        async with EpisodeEndpoint(st) as ep:
            client = openai.AsyncOpenAI(base_url=f"{ep.url}/v1", api_key=st.key, max_retries=0)
            for name, ask in CONSTRAINED.items():
                field = name.split(" ")[0]
                with pytest.raises(openai.BadRequestError, match=f"{field}: the episode endpoint samples") as e:
                    await ask(client)
                assert e.value.body["param"] == field, name
            # controls: the same requests without a constraint are answered
            await client.chat.completions.create(model="x", messages=HI, response_format={"type": "text"})
            await client.chat.completions.create(model="x", messages=HI, tools=[TOOL], tool_choice="auto")
            await client.completions.create(model="x", prompt="hi")
            await client.responses.create(model="x", input="hi")

    asyncio.run(main())
    assert len(st.client.seen) == 4 and all(p.structured is None for p in st.client.seen)
    assert [c.constrained for c in st.recorder.calls] == [""] * 4


def test_a_marked_constraint_still_keeps_within_serves_size_and_depth_limits(smollm2_tokenizer):
    agent = AgentConfig(kind="external", command=["true"], max_turn_tokens=20, constrained_requests="mark")
    st = EpisodeState(Spy(smollm2_tokenizer), smollm2_tokenizer, None, agent, seed=0)
    deep: dict = {"type": "string"}
    for _ in range(100):  # 200 brackets deep; compile time grows about with the nesting's cube
        deep = {"type": "object", "properties": {"a": deep}}

    async def main():
        async with EpisodeEndpoint(st) as ep:
            client = openai.AsyncOpenAI(base_url=f"{ep.url}/v1", api_key=st.key, max_retries=0)
            schema = {"type": "json_schema", "json_schema": {"name": "deep", "schema": deep}}
            with pytest.raises(openai.BadRequestError, match=r"grammar\.max_depth") as e:
                await client.chat.completions.create(model="x", messages=HI, response_format=schema)
            assert e.value.body["param"] == "response_format"
            # control: a small constraint is sampled (marked)
            await client.chat.completions.create(model="x", messages=HI, response_format={"type": "json_object"})

    asyncio.run(main())
    assert len(st.client.seen) == 1 and st.client.seen[0].structured is not None


def test_marked_constrained_segments_are_flagged_and_kept_out_of_the_loss(tiny_engine, smollm2_tokenizer, program,
                                                                         tmp_path):
    suite = parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks')}")
    argv = program(CLIENT + """
    client.chat.completions.create(model="any", messages=[{"role": "user", "content": "Answer in JSON."}],
                                   response_format={"type": "json_object"}, max_tokens=12)
    print("ok")
    """.replace("\n    ", "\n"))
    res = _run(tiny_engine, smollm2_tokenizer, suite, _agent(argv, constrained_requests="mark"))
    assert res.failure is None and len(res.trajectories) == 2, res.reward  # the second call rewrote the history
    plain, constrained = res.trajectories
    assert "constrained" not in plain.info and constrained.info["constrained"] == ["response_format"]
    for t in res.trajectories:
        t.group_id = "g"
    plain.reward = 1.0  # a group whose rewards differ, so that dynamic sampling keeps it
    f = filter_trajectories(res.trajectories, FilterConfig())
    assert f.train == [True, False] and f.stats.masked_overlong == 0  # in the baseline, out of the loss
    refused = _run(tiny_engine, smollm2_tokenizer, suite, _agent(argv))  # the default: refused, the program crashes
    assert refused.reward.info.get("program_crashed") and "response_format" in refused.reward.info["error"]
