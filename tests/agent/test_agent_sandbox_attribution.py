"""Who broke the sandbox decides the episode's fate: what the agent did to its own sandbox is scored
(a 0, trained on), a failure it could not have caused is an infrastructure failure (masked out)."""

import asyncio
import json
import os
import signal
from pathlib import Path

from temper.agent import AgentLoop
from temper.agent.tools import ToolContext, tool
from temper.envs import parse_spec
from temper.sandbox import SandboxCrashed
from temper.trajectory import FailureKind

# test.sh runs the agent's program, then writes a reward only when the task is done: a fifo the
# program left at the reward path is what the host then reads (it blocked the supervisor before).
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
cd /app && python3 solution.py
if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; fi
exit 0
"""
FIFO_AT_REWARD = "import os\nos.mkfifo('/logs/verifier/reward.txt')\n"


def _task_folder(root: Path) -> Path:
    d = root / "fifo-task"
    for sub in ("tests", "solution", "environment"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Write /app/solution.py so that it creates /app/done.txt.\n")
    (d / "task.toml").write_text('[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 3\n')
    (d / "tests" / "test.sh").write_text(TEST_SH)
    (d / "solution" / "solve.sh").write_text("echo \"open('/app/done.txt', 'w')\" > /app/solution.py\n")
    return d


def _breaker(by_agent: bool):
    @tool
    def breaker(ctx: ToolContext) -> str:
        """Break the sandbox."""
        raise SandboxCrashed("sandbox x: supervisor did not answer in time", by_agent=by_agent)

    return breaker


def _call(name: str, **arguments: object) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_an_agent_that_plants_a_fifo_at_the_reward_path_scores_zero_not_masked(tmp_path, scripted,
                                                                              smollm2_tokenizer) -> None:
    suite = parse_spec(f"terminal:path={_task_folder(tmp_path)}")
    (task,) = suite.tasks()
    client = scripted([_call("write_file", path="solution.py", content=FIFO_AT_REWARD), _call("submit")])
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(suite.make_env(task)))
    assert res.failure is None and res.trajectory.trainable, res.reward
    assert res.reward.value == 0.0 and res.reward.info["sandbox_broken_by_agent"]
    assert "not a regular file" in res.reward.info["error"]
    assert res.reward.info["test_exit_code"] == 0  # the verifier itself ran to its end


def test_a_sandbox_the_host_kills_mid_episode_stays_an_infrastructure_failure(tmp_path, scripted,
                                                                             smollm2_tokenizer) -> None:
    suite = parse_spec(f"terminal:path={_task_folder(tmp_path)}")
    (task,) = suite.tasks()
    env = suite.make_env(task)
    client = scripted([_call("bash", command="ls")] * 3)
    original = client.generate

    async def generate(ids, params):
        if len(client.requests) == 1:  # from outside, as the host's OOM killer or an operator would
            os.killpg(env.sandbox._sup._proc.pid, signal.SIGKILL)
        return await original(ids, params)

    client.generate = generate
    res = asyncio.run(AgentLoop(client, smollm2_tokenizer).run(env))
    assert res.failure == FailureKind.SANDBOX_CRASH and not res.trajectory.trainable
    assert "sandbox_broken_by_agent" not in res.reward.info


def test_a_crash_the_agent_caused_is_scored_and_one_it_could_not_cause_is_masked(tmp_path, scripted,
                                                                                smollm2_tokenizer) -> None:
    suite = parse_spec(f"terminal:path={_task_folder(tmp_path)}")
    (task,) = suite.tasks()
    for by_agent in (True, False):
        client = scripted([_call("breaker"), _call("submit")])
        loop = AgentLoop(client, smollm2_tokenizer, tools=[_breaker(by_agent)])
        res = asyncio.run(loop.run(suite.make_env(task)))
        assert "sandbox crashed during breaker" in res.reward.info["error"] and len(res.turns) == 1
        if by_agent:
            assert res.failure is None and res.reward.value == 0.0 and res.trajectory.trainable
        else:
            assert res.failure == FailureKind.SANDBOX_CRASH and not res.trajectory.trainable
