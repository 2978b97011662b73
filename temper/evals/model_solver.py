"""The model as a solver: each item is one `run_episode` through the policy's generation client
(an in-process engine, or an OpenAI-compatible server; temper.episode_runner), metered per item."""

import logging
import time
from typing import Any

from temper.agent.config import AgentConfig
from temper.agent.episode import tool_call_counts
from temper.agent.runner import sample_seed
from temper.envs.reward import episode_info
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.episode_runner import EpisodeRunner, open_runner, run_episode
from temper.evals.config import EvalConfig
from temper.evals.metering import MeteredClient
from temper.evals.solvers import Outcome
from temper.generation import RemoteGenerationConfig

log = logging.getLogger("temper.eval")


class ModelSolver:
    name = "model"

    def __init__(self, policy: EpisodeRunner, cfg: EvalConfig, model_name: str | None = None) -> None:
        self.policy, self.cfg = policy, cfg
        self.model_name = model_name or policy.name or cfg.model  # what summary.json names as the model

    @classmethod
    def load(cls, cfg: EvalConfig) -> "ModelSolver":
        """Load `cfg.model` and start an in-process engine for it (or, with `cfg.endpoint`, generate there:
        the tokenizer of `cfg.model` stays local, token ids in and out)."""
        if cfg.endpoint:
            remote = RemoteGenerationConfig(url=cfg.endpoint, model=cfg.endpoint_model)
            return cls(open_runner(cfg.model, remote=remote), cfg)
        start = time.perf_counter()
        policy = open_runner(cfg.model, cfg.engine, device=cfg.runtime.device)
        log.info("loaded %s in %.1f s", cfg.model, time.perf_counter() - start)
        return cls(policy, cfg)

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, cfg: EvalConfig,
                   model_name: str = "in-memory model") -> "ModelSolver":
        """An in-process engine on a model object (e.g. the policy being trained)."""
        return cls(open_runner(model, cfg.engine, tokenizer=tokenizer, name=model_name), cfg)

    def agent(self) -> AgentConfig:
        """The eval's agent within the engine's context length."""
        a = self.cfg.agent
        budget = min(a.max_context_tokens, self.policy.max_model_len or a.max_context_tokens)
        return a.model_copy(update={"max_context_tokens": budget})

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        metered = MeteredClient(self.policy.client)
        pool = self.policy.sandboxes or self.cfg.sandbox_provider()
        result = await run_episode(metered, self.policy.tokenizer, suite, task, pool, self.agent(),
                                   sample_seed(self.cfg.seed, task.id, sample), episode_id=f"s{sample}")
        return Outcome(result.reward, output=result.answer, tokens_in=metered.tokens_in,
                       tokens_out=metered.tokens_out, ttft_s=metered.ttft_s, tpot_s=metered.tpot_s,
                       turns=len(result.turns), info={"windows": len(result.trajectories),
                                                      "kv_cache_mb": self._kv_mb(metered.max_context),
                                                      **tool_call_counts(result.turns),
                                                      **episode_info(result.reward, last_window=True)})

    def _kv_mb(self, tokens: int) -> float | None:
        """KV cache memory of the item's longest sequence: the memory that grows with context length
        (the process peak barely moves, since the engine allocates its cache up front)."""
        per_token = self.policy.kv_bytes_per_token
        return round(tokens * per_token / 2**20, 3) if per_token else None

    def close(self) -> None:
        self.policy.close()
