"""Optional experiment trackers: TensorBoard and Weights & Biases (offline mode, no network).

Both log every numeric field of a metrics row at its step. W&B runs offline under the run folder
(`wandb sync RUN/wandb/offline-run-*` uploads it later); it never probes git, captures the console
or samples system stats, so it costs little on a busy machine and needs no network or login.
"""

import os
from pathlib import Path
from typing import Any

from temper.errors import TemperError
from temper.orchestrator.config import LoggingConfig

# Quiet, local-only W&B unless the user set these already (the explicit settings below still win
# on mode: temper never sends anything itself).
WANDB_ENV = {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DISABLE_GIT": "true", "WANDB_CONSOLE": "off"}


class Trackers:
    def __init__(self, cfg: LoggingConfig, run_dir: Path, config: dict[str, Any] | None = None):
        self.tb: Any = None
        self.wandb: Any = None
        if cfg.tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise TemperError(f"logging.tensorboard: needs the tensorboard package ({exc}); "
                                  "pip install 'temper[tracking]'") from None
            self.tb = SummaryWriter(str(run_dir / "tensorboard"))
        if cfg.wandb:
            for k, v in WANDB_ENV.items():
                os.environ.setdefault(k, v)
            try:
                import wandb
            except ImportError as exc:
                raise TemperError(f"logging.wandb: needs the wandb package ({exc}); "
                                  "pip install 'temper[tracking]'") from None
            opts = {"mode": "offline", "console": "off", "disable_git": True, "disable_code": True, "silent": True,
                    "x_disable_stats": True}  # x_*: private in wandb, so only where this version has it
            settings = wandb.Settings(**{k: v for k, v in opts.items() if k in wandb.Settings.model_fields})
            self.wandb = wandb.init(dir=str(run_dir), project="temper", name=run_dir.name, mode="offline",
                                    config=config, settings=settings)

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
