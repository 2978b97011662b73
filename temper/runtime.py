"""Process-wide runtime settings (threads, seeds) that every command applies the same way."""

import os
import random

import numpy as np
import torch

from temper.config import ConfigModel


class RuntimeConfig(ConfigModel):
    # On a busy 2-core box one intra-op thread is often faster than two for small models
    # (FIELD_NOTES): make it a setting and measure rather than assume. 0 = torch's default.
    threads: int = 1
    seed: int = 0


def apply_runtime(cfg: RuntimeConfig) -> None:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    seed_everything(cfg.seed)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
