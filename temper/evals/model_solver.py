"""The model as a solver: each item is one agent-loop episode driven through a generation client
(the in-process engine, or anything speaking the generation protocol), metered per item."""

import logging
import time
from dataclasses import replace
from typing import Any

from temper.agent.episode import AgentConfig
from temper.agent.loop import AgentLoop
from temper.envs.env import EpisodeLimits
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.evals.config import EvalConfig
from temper.evals.metering import MeteredClient
from temper.evals.solvers import Outcome
from temper.generation.protocol import ChatTokenizer

log = logging.getLogger("temper.eval")


class ModelSolver:
    name = "model"

    def __init__(self, client: Any, tokenizer: ChatTokenizer, cfg: EvalConfig, max_model_len: int | None = None,
                 owned: Any = None, model_name: str | None = None) -> None:
        self.client, self.tok, self.cfg = client, tokenizer, cfg
        self.model_name = model_name or cfg.model  # what summary.json names as the model
        self.max_model_len = max_model_len
        self._owned = owned  # an engine this solver started and must close

    @classmethod
    def load(cls, cfg: EvalConfig) -> "ModelSolver":
        """Load `cfg.model` and start an in-process engine for it (or, with `cfg.endpoint`, generate there)."""
        from temper.models import load_model

        if cfg.endpoint:
            return cls.remote(cfg)

        start = time.perf_counter()
        loaded = load_model(cfg.model)
        log.info("loaded %s in %.1f s", cfg.model, time.perf_counter() - start)
        return cls.from_model(loaded.model, loaded.tokenizer, cfg, cfg.model)

    @classmethod
    def from_model(cls, model: Any, tokenizer: ChatTokenizer, cfg: EvalConfig,
                   model_name: str = "in-memory model") -> "ModelSolver":
        """An in-process engine on a model object (e.g. the policy being trained)."""
        from temper.engine import AsyncEngine, LLMEngine

        engine = AsyncEngine(LLMEngine(model, tokenizer, cfg.engine))
        return cls(engine, tokenizer, cfg, engine.engine.max_model_len, owned=engine, model_name=model_name)

    @classmethod
    def remote(cls, cfg: EvalConfig) -> "ModelSolver":
        """Generate on an OpenAI-compatible server; the tokenizer of `cfg.model` stays local (token ids in/out)."""
        from temper.generation import default_served_name
        from temper.generation.remote_client import RemoteClient
        from temper.models import Tokenizer, resolve_model

        tok = Tokenizer.from_folder(resolve_model(cfg.model))
        name = cfg.endpoint_model or default_served_name(cfg.model)
        client = RemoteClient(cfg.endpoint or "", name, tokenizer=tok)
        return cls(client, tok, cfg, model_name=f"{name} @ {cfg.endpoint}")

    def limits(self) -> EpisodeLimits:
        a = self.cfg.agent
        budget = min(a.max_tokens, self.max_model_len) if self.max_model_len else a.max_tokens
        return EpisodeLimits(max_turns=a.max_turns, turn_timeout_s=a.turn_timeout_s,
                             episode_timeout_s=a.episode_timeout_s, max_tokens=budget,
                             max_turn_tokens=a.max_turn_tokens)

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        metered = MeteredClient(self.client)
        s = self.cfg.sampling
        agent = AgentConfig(system_prompt=self.cfg.agent.system_prompt, temperature=self.cfg.temperature(),
                            top_p=s.top_p, seed=_seed(s.seed, task.id, sample))
        limits = self.limits()
        env = suite.make_env(task, None, limits)
        # Terminal tasks set their own time limits; the token limits are ours.
        env.limits = replace(env.limits, max_tokens=limits.max_tokens, max_turn_tokens=limits.max_turn_tokens,
                             max_turns=limits.max_turns)
        result = await AgentLoop(metered, self.tok, agent).run(env, group_id=task.id, episode_id=f"s{sample}")
        return Outcome(result.reward, output=result.answer, tokens_in=metered.tokens_in,
                       tokens_out=metered.tokens_out, ttft_s=metered.ttft_s, tpot_s=metered.tpot_s,
                       turns=len(result.turns), info={"windows": len(result.trajectories),
                                                      "kv_cache_mb": self._kv_mb(metered.max_context)})

    def _kv_mb(self, tokens: int) -> float | None:
        """KV cache memory of the item's longest sequence: the memory that grows with context length
        (the process peak barely moves, since the engine allocates its cache up front)."""
        engine = getattr(self._owned, "engine", None) or getattr(self.client, "engine", None)
        per_token = getattr(engine, "kv_bytes_per_token", None)
        return round(tokens * per_token / 2**20, 3) if per_token else None

    def close(self) -> None:
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def _seed(base: int, task_id: str, sample: int) -> int:
    """Distinct per (task, sample) and stable across runs, so a resumed run draws the same samples."""
    import hashlib

    digest = hashlib.sha256(f"{base}:{task_id}:{sample}".encode()).hexdigest()
    return int(digest[:8], 16) % (2**31 - 1)
