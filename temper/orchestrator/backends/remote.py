"""The remote backend: rollout workers in this process that generate on an OpenAI-compatible server
(`temper serve`, vLLM, SGLang) through `RemoteClient`, with token ids in and out. New weights go to
the server after each training step (`/v1/load_weights` for `temper serve`, with
its admin token)."""

import time
from typing import Any

from temper.envs import parse_spec
from temper.episode_runner import open_runner
from temper.orchestrator.backends.local import LocalBackend
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec


class RemoteBackend(LocalBackend):
    """The local backend's workers, all on one server's policy instead of an engine each."""

    def __init__(self, model: str, remote: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int = 1,
                 sandbox: Any = None):
        suites = [parse_spec(s) for s in suite_specs]
        # One server, one client and one sandbox pool, shared by the workers; their fault-injection salts differ.
        self.policy = open_runner(model, remote=remote, needs_sandbox=any(s.needs_sandbox for s in suites),
                                  sandbox=sandbox)
        # temper serve's weight routes need its operator token (orchestrator.remote.admin_token_file / _env)
        self.policy.client.admin_token = remote.admin_token()
        self.workers = [RolloutWorker(self.policy, suites, spec.salted(i)) for i in range(num_workers)]
        self.num_workers = num_workers
        self.update_ms = None

    async def push_weights(self, state: dict, version: int) -> None:
        # One server: push once (the workers' gates still order the update against their requests).
        start = time.perf_counter()
        await self.workers[0].load_weights(state, version)
        self.update_ms = (time.perf_counter() - start) * 1000

    def close(self) -> None:
        self.policy.close()
