"""Backends by role: `protocol` (the interface and the episode result), `local` (workers in this
process, the default), `ray` (workers as Ray actors), `remote` (an OpenAI-compatible server),
`vllm` (vLLM servers, started here or attached)."""

from typing import Any

from temper.orchestrator.backends.protocol import Attempt, Backend, BackendExhausted


def episode_sandbox(cfg: Any, sandbox_run_dir: str | None) -> Any:
    """The SandboxConfig of a training run's episodes: its run folder's, under the recipe's `task_max`."""
    from temper.sandbox import SandboxConfig

    return SandboxConfig(task_max=cfg.task_max, **({"run_dir": sandbox_run_dir} if sandbox_run_dir else {}))


def make_backend(cfg: Any, suite_specs: list[str], sandbox_run_dir: str | None, run_dir: Any = None,
                 dtype: str = "float32") -> Any:
    """The backend `cfg.orchestrator.backend` names; `run_dir` holds managed servers' logs, `dtype` is theirs."""
    from temper.orchestrator.rollout_worker import WorkerSpec  # imports this package's protocol

    o, spec = cfg.orchestrator, WorkerSpec.of(cfg)
    sandbox = episode_sandbox(cfg, sandbox_run_dir)
    if o.backend == "remote":
        from temper.orchestrator.backends.remote import RemoteBackend

        return RemoteBackend(cfg.model, o.remote, suite_specs, spec, o.num_workers, sandbox)
    if o.backend == "vllm":
        from temper.orchestrator.backends.vllm import VllmBackend

        return VllmBackend(cfg.model, o.vllm, suite_specs, spec, sandbox, run_dir, o.vllm.dtype or dtype)
    if o.backend == "ray":
        from temper.orchestrator.backends.ray import RayBackend

        return RayBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox, threads=cfg.runtime.threads,
                          ray_cfg=o.ray, device=cfg.runtime.device)
    from temper.orchestrator.backends.local import LocalBackend

    return LocalBackend(cfg.model, cfg.engine, suite_specs, spec, o.num_workers, sandbox, device=cfg.runtime.device)


__all__ = ["Attempt", "Backend", "BackendExhausted", "episode_sandbox", "make_backend"]
