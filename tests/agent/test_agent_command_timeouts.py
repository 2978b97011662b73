"""A tool's sandbox command never outlives its call or the episode: its `timeout` is clamped to
agent.tool_timeout_s and to the episode's remaining time (the sandbox kills it there), and a call cut
short is waited for as the agent's time, never by the verifier. Before, a policy could ask bash for a
long timeout, leave the command holding the sandbox, and have its episode masked as harness_timeout
instead of scored 0. Each attack beside its control."""

import asyncio
import json
import time
from pathlib import Path

import pytest

from temper.agent import AgentConfig, AgentLoop
from temper.envs import parse_spec

TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/done.txt 2>/dev/null)" = "ok" ]; then r=1; else r=0; fi
echo $r > /logs/verifier/reward.txt
"""


def _suite(root: Path, agent_timeout_s: int):
    d = root / "make-done"
    for sub in ("tests", "solution", "environment"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Write the word ok into /app/done.txt.\n")
    (d / "task.toml").write_text(f'[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = {agent_timeout_s}\n'
                                 "[verifier]\ntimeout_sec = 4\n")
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "solution" / "solve.sh").write_text("echo ok > /app/done.txt\n")
    return parse_spec(f"terminal:path={d.parent}")


def _call(name: str, **arguments: object) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


ATTACKS = {
    # the tool's own timeout (90 s) past agent.tool_timeout_s (1 s): the loop gave up at 1.5 s, the command went on
    "past_the_tool_timeout": (60, AgentConfig(tool_timeout_s=1.0, tool_grace_s=0.5)),
    # the episode (2 s) ends during the call: the verifier used to queue behind the command
    "past_the_episode": (2, AgentConfig()),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_long_command_is_killed_and_the_episode_scored_not_masked(tmp_path, scripted, smollm2_tokenizer, attack):
    agent_timeout_s, cfg = ATTACKS[attack]
    suite = _suite(tmp_path, agent_timeout_s)
    (task,) = suite.tasks()
    client = scripted([_call("bash", command="sleep 90", timeout=90), _call("submit")])
    start = time.monotonic()
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer, cfg).run(suite.make_env(task)))
    assert res.failure is None and res.reward.value == 0.0, res.reward  # scored: not harness_timeout
    assert res.trajectory.trainable and time.monotonic() - start < 20
    if attack == "past_the_tool_timeout":  # the sandbox killed it at the clamp, and said so
        assert "wall time limit" in res.turns[0].tool_calls[0].output, res.turns[0].tool_calls[0].output
    else:
        assert res.trajectory.truncated
    control = scripted([_call("bash", command="echo ok > /app/done.txt", timeout=30), _call("submit")])
    ok = asyncio.run(AgentLoop(control, smollm2_tokenizer, cfg).run(suite.make_env(task)))
    assert ok.failure is None and ok.reward.value == 1.0, ok.reward
