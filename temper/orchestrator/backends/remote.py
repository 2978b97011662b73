"""The remote backend: rollout workers in this process that generate on an OpenAI-compatible server
(`temper serve`, vLLM, SGLang) through `RemoteClient`, with token ids in and out. New weights go to
the server after each training step (`/v1/load_weights` for `temper serve`)."""

from typing import Any

from temper.orchestrator.backends.protocol import Attempt
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec, sum_counters


class RemoteBackend:
    def __init__(self, model: str, remote: Any, suite_specs: list[str], spec: WorkerSpec, num_workers: int = 1,
                 sandbox_run_dir: str | None = None):
        from temper.envs import parse_spec
        from temper.generation import default_served_name
        from temper.generation.remote_client import RemoteClient
        from temper.models import Tokenizer, resolve_model

        # The tokenizer is local (the agent loop works on token ids); the weights live on the server.
        tokenizer = Tokenizer.from_folder(resolve_model(model))
        self.client = RemoteClient(remote.url, remote.model or default_served_name(model), remote.api_key,
                                   tokenizer, remote.timeout_s, weights_dir=remote.weights_dir)
        suites = [parse_spec(s) for s in suite_specs]
        self.pool = None
        if any(s.needs_sandbox for s in suites):
            from temper.sandbox import SandboxConfig, SandboxPool

            extra = {"run_dir": sandbox_run_dir} if sandbox_run_dir else {}
            self.pool = SandboxPool(SandboxConfig(pool_size=2, **extra))
        # Workers share the one client (one server); only their fault-injection salts differ.
        self.workers = [RolloutWorker(self.client, tokenizer, suites, WorkerSpec(**{**spec.__dict__, "salt": i}),
                                      self.pool) for i in range(num_workers)]
        self.num_workers = num_workers

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False) -> Attempt:
        return await self.workers[worker].run_episode(suite_index, task_id, group_id, index, eval_mode)

    async def push_weights(self, state: dict, version: int) -> None:
        # One server: push once (the workers' gates still order the update against their requests).
        await self.workers[0].load_weights(state, version)

    def counters(self) -> dict[str, float]:
        return sum_counters(w.counters() for w in self.workers)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
