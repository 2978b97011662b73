"""RL for LLM agents: advantages, losses, off-policy correction, packing, the trainer, SFT, FSDP2.

It knows tensors and trajectories, not environments.
"""

from temper.rl.config import RLConfig, SFTConfig, TrainerConfig
from temper.rl.trainer import Trainer

__all__ = ["RLConfig", "SFTConfig", "Trainer", "TrainerConfig"]
