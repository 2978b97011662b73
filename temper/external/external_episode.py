"""`run_external_episode`: one episode of a task by an external agent program.

The task's environment is reset (its sandbox set up), a per-episode endpoint starts, the program
runs with its environment (OPENAI_BASE_URL, OPENAI_API_KEY, TEMPER_INSTRUCTION and the sandbox's
TEMPER_*_URL routes: docs/agents.md), and when it exits or times out the task's verifier scores what it
left: the answer is its stdout (stripped), the sandbox is what it did there. Failure kinds:

- infrastructure (masked, retried): the program never reached the model (a missing binary, a bad
  config); the policy failed; the sandbox crashed under the host;
- scored: the program ran and exited 0 (given up or not), or ran out of time (truncated);
- a 0 (`info.program_crashed`): it crashed (non-zero exit, a signal) after calling the model: what
  the policy made of its harness is the policy's, so crashing cannot opt an episode out of its 0.
"""

import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temper.agent.config import AgentConfig
from temper.agent.episode import EpisodeResult, TurnRecord, turn_actions
from temper.envs.env import Environment
from temper.envs.reward import Reward, episode_info
from temper.envs.sandboxes import crash_reward
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.external.endpoint import EpisodeEndpoint, EpisodeState
from temper.external.program import ProgramResult, run_program
from temper.generation.protocol import ChatTokenizer, GenerationClient
from temper.trajectory import FailureKind


async def run_external_episode(client: GenerationClient, tokenizer: ChatTokenizer, suite: Suite, task: Task,
                               sandboxes: Any, config: AgentConfig, seed: int | None = None, *,
                               group_id: str | None = None, episode_id: str | None = None,
                               wrap_env: Callable[[Environment], Environment] | None = None) -> EpisodeResult:
    env = suite.make_env(task, sandboxes)
    if wrap_env is not None:
        env = wrap_env(env)
    episode_id = episode_id or uuid.uuid4().hex[:10]
    cfg = config.for_task(env.limits)
    state = EpisodeState(client, tokenizer, env, cfg, seed)
    timings = {"reset_s": 0.0, "program_s": 0.0, "generate_s": 0.0, "verify_s": 0.0}
    program: ProgramResult | None = None
    truncated = False
    async with env:
        try:
            t = asyncio.get_running_loop().time()
            async with asyncio.timeout(cfg.turn_timeout_s):
                obs = await env.reset()
            timings["reset_s"] = asyncio.get_running_loop().time() - t
            with tempfile.TemporaryDirectory(prefix="temper-agent-") as work:
                state.deadline = time.monotonic() + cfg.episode_timeout_s
                async with EpisodeEndpoint(state) as ep:  # its exit waits for the program's sandbox calls
                    program = await run_program(list(cfg.command or []), _program_env(ep.url, state.key, obs.content),
                                                Path(work), cfg.episode_timeout_s, cfg.memory_mb)
            timings["program_s"] = program.duration_s
            reward, truncated = await _score(env, state, program, timings)
        except Exception as exc:  # the episode fails alone (its environment could not start, ...)
            reward = Reward.infra(FailureKind.WORKER_ERROR, f"{type(exc).__name__}: {exc}")
    return _result(task, state, reward, program, timings, truncated, group_id or task.id, episode_id)


def _program_env(url: str, key: str, instruction: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "TEMPER_"))}
    return {**keep, "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": key, "TEMPER_INSTRUCTION": instruction,
            "TEMPER_EXEC_URL": f"{url}/exec", "TEMPER_FILES_URL": f"{url}/files",
            "TEMPER_SHELL_URL": f"{url}/shell", "TEMPER_RENDER_URL": f"{url}/render"}


async def _score(env: Environment, state: EpisodeState, program: ProgramResult,
                 timings: dict[str, float]) -> tuple[Reward, bool]:
    """The episode's reward and whether it ran out of time; infrastructure failures are not scored."""
    calls = len(state.recorder.calls)
    if state.engine_error is not None:
        return Reward.infra(FailureKind.ENGINE_ERROR, state.engine_error), False
    if state.sandbox_crash is not None:
        return crash_reward(state.sandbox_crash, "during the agent program's exec"), False
    if not calls:
        return Reward.infra(FailureKind.AGENT_PROGRAM, f"the agent program never called the model: "
                            f"{program.describe()}"), False
    if not program.timed_out and program.exit_code != 0:  # the policy's harness: what it did ends there
        return Reward(value=0.0, info={"error": f"the agent program crashed after {calls} model calls: "
                                                f"{program.describe()}", "program_crashed": True}), False
    t = asyncio.get_running_loop().time()
    result = await env.step(program.stdout.strip())
    timings["verify_s"] = asyncio.get_running_loop().time() - t
    return result.reward or Reward(), program.timed_out


def _result(task: Task, state: EpisodeState, reward: Reward, program: ProgramResult | None, timings: dict[str, float],
            truncated: bool, group_id: str, episode_id: str) -> EpisodeResult:
    rec = state.recorder
    timings["generate_s"] = sum(c.duration_s for c in rec.calls)
    turns = [TurnRecord(i, c.segment, c.duration_s, 0.0, len(c.completion.token_ids), 0, c.completion.finish_reason)
             for i, c in enumerate(rec.calls)]
    if turns:
        turns[-1].tool_calls = list(state.actions)  # the sandbox actions, in order (not tied to a call)
    info = {"suite": task.suite, "agent": "external", **rec.stats(),
            **({"program": {"exit_code": program.exit_code, "timed_out": program.timed_out,
                            "stdout_tail": program.stdout, "stderr_tail": program.stderr}} if program else {}),
            **({"error": reward.info["error"]} if "error" in reward.info else {}),
            **({"program_crashed": True} if reward.info.get("program_crashed") else {}),
            **({"exec_interrupted": True} if state.exec_interrupted else {})}
    trajs = [seg.to_trajectory(reward=reward.value, reward_components=dict(reward.components), task_id=task.id,
                               group_id=group_id, id=f"{task.id}-{episode_id}-{i}", failure=reward.failure,
                               truncated=truncated, timings=dict(timings),
                               info={**info, "window": i, "windows": len(rec.segments),
                                     "actions": turn_actions(turns, i),
                                     **episode_info(reward, i == len(rec.segments) - 1),
                                     **({"constrained": rec.constrained(i)} if rec.constrained(i) else {})})
             for i, seg in enumerate(rec.segments)]
    answer = program.stdout.strip() if program else ""
    return EpisodeResult(task, trajs, reward, turns, state.messages, answer)
