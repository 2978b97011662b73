"""Process-wide runtime settings (threads, seeds, device) that every command applies the same way, and a free
TCP port for the servers and process groups a command starts."""

import os
import random
import re
from typing import Any

import numpy as np
import torch
from pydantic import field_validator

from temper.config import ConfigModel
from temper.errors import TemperError

DEVICE_PATTERN = re.compile(r"auto|cpu|cuda(:\d+)?")


class RuntimeConfig(ConfigModel):
    # On a busy 2-core box one intra-op thread is often faster than two for small models
    # (2 threads measured 5-30x slower than 1): make it a setting and measure. 0 = torch's default.
    threads: int = 1
    # temper train (local backend, one trainer process): the engine's and the trainer's threads each use all the
    # machine's cores while the other waits, `threads` while both work (temper/cores.py)
    share_cores: bool = True
    seed: int = 0
    # Where models, the engine and the trainer run: auto = the first CUDA GPU when torch sees one, else cpu.
    device: str = "auto"

    @field_validator("device")
    @classmethod
    def _known_device(cls, value: str) -> str:
        if not DEVICE_PATTERN.fullmatch(value):
            raise ValueError("must be auto, cpu, cuda or cuda:N")
        return value


def resolve_device(spec: str = "auto") -> torch.device:
    """`runtime.device` as a torch.device: auto picks CUDA when torch.cuda.is_available(), else cpu.
    A malformed value or a CUDA device this machine lacks is one TemperError naming runtime.device."""
    if not DEVICE_PATTERN.fullmatch(spec):
        raise TemperError(f"runtime.device={spec!r}: must be auto, cpu, cuda or cuda:N")
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(spec)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise TemperError(f"runtime.device={spec!r}: CUDA is not available on this machine "
                              "(torch.cuda.is_available() is False); use cpu or auto")
        count = torch.cuda.device_count()
        if device.index is not None and device.index >= count:
            raise TemperError(f"runtime.device={spec!r}: this machine has {count} CUDA device(s) "
                              f"(cuda:0 to cuda:{count - 1})")
    return device


def apply_runtime(cfg: RuntimeConfig) -> torch.device:
    """Threads, seeds and the device check (an unavailable device fails here, before any model loads);
    returns the resolved device."""
    device = resolve_device(cfg.device)
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    seed_everything(cfg.seed)
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (PNG files, no display needed), chosen before pyplot first loads.
    Every plot module takes pyplot from here (ImportError when matplotlib is not installed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt
