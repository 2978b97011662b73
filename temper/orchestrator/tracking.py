"""Optional experiment trackers: TensorBoard and Weights & Biases (offline mode, no network)."""

import os
from pathlib import Path
from typing import Any

from temper.errors import TemperError
from temper.orchestrator.config import LoggingConfig


class Trackers:
    def __init__(self, cfg: LoggingConfig, run_dir: Path):
        self.tb: Any = None
        self.wandb: Any = None
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise TemperError(f"logging.tensorboard: needs the tensorboard package ({exc})") from None
            self.tb = SummaryWriter(str(run_dir / "tensorboard"))
        if cfg.wandb:
            try:
                import wandb
            except ImportError as exc:
                raise TemperError(f"logging.wandb: needs the wandb package ({exc})") from None
            os.environ.setdefault("WANDB_MODE", "offline")
            self.wandb = wandb.init(dir=str(run_dir), project="temper", name=run_dir.name, mode="offline")

    def log(self, row: dict[str, Any]) -> None:
        scalars = {k: float(v) for k, v in row.items() if isinstance(v, int | float)}
        if self.tb is not None:
            for k, v in scalars.items():
                self.tb.add_scalar(k, v, int(row["step"]))
        if self.wandb is not None:
            self.wandb.log(scalars, step=int(row["step"]))

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb is not None:
            self.wandb.finish()
