"""`run_builtin_episode`: one episode of a task run by temper's own agent loop, start to end; and the
sampling seed of each sample. `temper.episode_runner.run_episode` dispatches every episode (this one, or a
user's external program) so that training, `temper eval` and env QA mean the same thing by an episode."""

import hashlib
from collections.abc import Callable
from typing import Any

from temper.agent.config import AgentConfig
from temper.agent.episode import EpisodeResult
from temper.agent.loop import AgentLoop
from temper.envs.env import Environment
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.generation.protocol import ChatTokenizer, GenerationClient


async def run_builtin_episode(client: GenerationClient, tokenizer: ChatTokenizer, suite: Suite, task: Task,
                              sandboxes: Any, config: AgentConfig, seed: int | None = None, *,
                              group_id: str | None = None, episode_id: str | None = None,
                              wrap_env: Callable[[Environment], Environment] | None = None) -> EpisodeResult:
    """The suite's environment for `task` (sandboxes from `sandboxes`: a pool, or None for fresh
    ones), run by the agent loop under `config` and the task's own limits. Failures are in the
    result (`result.failure`), never raised. `wrap_env` wraps the environment (fault injection)."""
    env = suite.make_env(task, sandboxes)
    if wrap_env is not None:
        env = wrap_env(env)
    return await AgentLoop(client, tokenizer, config).run(env, group_id=task.id if group_id is None else group_id,
                                                          episode_id=episode_id, seed=seed)


def sample_seed(base: int, task_id: str, sample: int) -> int:
    """The sampling seed of sample `sample` of a task: distinct per (task, sample) and stable across
    runs, so a resumed run draws the same samples."""
    digest = hashlib.sha256(f"{base}:{task_id}:{sample}".encode()).hexdigest()
    return int(digest[:8], 16) % (2**31 - 1)
