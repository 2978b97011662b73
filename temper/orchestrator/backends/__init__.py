"""Backends by role: `protocol` (the interface and the episode result), `local` (workers in this
process, the default), `ray` (workers as Ray actors), `remote` (an OpenAI-compatible server)."""

from typing import Any

from temper.orchestrator.backends.protocol import Attempt, Backend


def make_backend(cfg: Any, suite_specs: list[str], sandbox_run_dir: str | None) -> Any:
    from temper.orchestrator.rollout_worker import WorkerSpec  # imports this package's protocol

    o = cfg.orchestrator
    spec = WorkerSpec(agent=cfg.agent, faults=o.faults, partial_rollouts=o.partial_rollouts,
                      episode_timeout_s=o.episode_timeout_s, eval_temperature=cfg.eval.temperature,
                      eval_max_new_tokens=cfg.eval.max_new_tokens, salt=0)
    if o.backend == "remote":
        from temper.orchestrator.backends.remote import RemoteBackend

        return RemoteBackend(cfg.model, o.remote, suite_specs, spec, o.num_workers, sandbox_run_dir)
    if o.backend == "ray":
        from temper.orchestrator.backends.ray import RayBackend

        return RayBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox_run_dir,
                          threads=cfg.runtime.threads)
    from temper.orchestrator.backends.local import LocalBackend

    return LocalBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox_run_dir)


__all__ = ["Attempt", "Backend", "make_backend"]
