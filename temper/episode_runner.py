"""What running episodes takes, and running one. `EpisodeRunner`: a generation client (an in-process
engine, or an OpenAI-compatible server), its tokenizer and, when the suites need one, a warm sandbox
pool with the mounts episodes need; rollout workers (every backend), `temper eval` and `temper envqa`
open theirs with `open_runner`. `run_episode`: one episode, by temper's agent loop or by the user's own
program (`agent.kind: external`), the one entry point they all call.

    runner = open_runner("smollm2-135m", EngineConfig(), needs_sandbox=True)
    result = await run_episode(runner.client, runner.tokenizer, suite, task, runner.sandboxes, config)
    runner.close()
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from temper.agent.config import AgentConfig
from temper.agent.episode import EpisodeResult
from temper.agent.runner import run_builtin_episode
from temper.envs.env import Environment
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.generation import ChatTokenizer, GenerationClient, RemoteClient, RemoteGenerationConfig, default_served_name


async def run_episode(client: GenerationClient, tokenizer: ChatTokenizer, suite: Suite, task: Task, sandboxes: Any,
                      config: AgentConfig, seed: int | None = None, *, group_id: str | None = None,
                      episode_id: str | None = None,
                      wrap_env: Callable[[Environment], Environment] | None = None) -> EpisodeResult:
    """One episode of `task` under `config`: temper's agent loop, or the external program `config` names.
    Failures are in the result (`result.failure`), never raised; `wrap_env` wraps the environment."""
    if config.kind == "external":
        from temper.external.external_episode import run_external_episode  # serve's route layer: loaded on use

        run = run_external_episode
    else:
        run = run_builtin_episode
    return await run(client, tokenizer, suite, task, sandboxes, config, seed, group_id=group_id, episode_id=episode_id,
                     wrap_env=wrap_env)


@dataclass
class EpisodeRunner:
    client: GenerationClient
    tokenizer: ChatTokenizer
    sandboxes: Any = None  # a temper.sandbox.SandboxPool with the episode mounts, or None: fresh sandboxes
    max_model_len: int | None = None  # the engine's context limit (None: a server's, not known here)
    kv_bytes_per_token: int | None = None  # of the engine's KV cache (None: on a server)
    name: str = ""  # what reports call the model
    engine: Any = None  # the AsyncEngine this policy started (None: a server's)

    def close(self) -> None:
        for part in (self.engine, self.sandboxes):
            if part is not None:
                part.close()
        self.engine = self.sandboxes = None


def open_runner(model: Any, engine: Any = None, remote: RemoteGenerationConfig | None = None, *,
                tokenizer: ChatTokenizer | None = None, name: str | None = None, needs_sandbox: bool = False,
                sandbox: Any = None, pool_size: int = 8, device: str = "auto") -> EpisodeRunner:
    """`model` (a name or folder, loaded on `device`, a `runtime.device` value; or a model object, with its
    `tokenizer`, whose engine runs where its parameters are) on an in-process engine
    under `engine` (a temper.engine.EngineConfig; None: its defaults), or, with `remote`, generating
    on that server with the model's tokenizer kept here (token ids in and out). With `needs_sandbox`,
    a warm pool of `pool_size` sandboxes on `sandbox` (a SandboxConfig; a cold start per episode is slow)."""
    if remote is not None:
        from temper.models import Tokenizer, resolve_model

        tok = tokenizer or Tokenizer.from_folder(resolve_model(model))
        served = remote.model or default_served_name(model)
        client: Any = RemoteClient(remote.url, served, remote.api_key, tok, remote.timeout_s,
                                   weights_dir=remote.weights_dir)
        policy = EpisodeRunner(client, tok, name=name or f"{served} @ {remote.url}")
    else:
        from temper.engine import AsyncEngine, LLMEngine

        if isinstance(model, str):
            from temper.models import load_model
            from temper.runtime import resolve_device

            loaded = load_model(model, device=resolve_device(device))
            model, tokenizer, name = loaded.model, loaded.tokenizer, name or model
        llm = LLMEngine(model, tokenizer, engine)
        client = AsyncEngine(llm)
        policy = EpisodeRunner(client, tokenizer, max_model_len=llm.max_model_len,
                               kv_bytes_per_token=llm.kv_bytes_per_token, name=name or "in-memory model", engine=client)
    if needs_sandbox:
        from temper.envs.sandboxes import make_pool

        policy.sandboxes = make_pool(sandbox, size=pool_size)
    return policy
