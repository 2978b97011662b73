"""Orchestration: the asynchronous rollout -> store -> trainer pipeline behind `temper train`.

See docs/train.md. The main loop is `train.py`; the pieces are one file each: `config`,
`store`, `scheduler`, `faults`, `replay`, `rollout_worker`, `pipeline`, `backend_solver` (its
evaluations, through temper.evals), `backends/` (local, ray, remote), `progress`, `plots`,
`run_dir`, `tracking`.
"""

from temper.orchestrator.config import TrainConfig

__all__ = ["TrainConfig"]
