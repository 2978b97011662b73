"""GAE's critic: a value head (a linear layer, zero at the start) on the final hidden state that predicts each
model token, the per-token advantages and returns it gives, and its loss."""

import torch
from torch import nn

from temper.rl.batching import MicroBatch


def gae(rewards: torch.Tensor, values: torch.Tensor, gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the steps (model tokens) of one episode.

    rewards, values: [n] for the episode's model tokens in order (observation tokens between turns
    are not steps, so credit flows across turns); the value after the last step is 0.
    delta_t = r_t + gamma V_{t+1} - V_t;  A_t = delta_t + gamma lam A_{t+1};  returns R_t = A_t + V_t.
    """
    r, v = rewards.tolist(), values.tolist()
    adv = [0.0] * len(v)
    next_value, next_adv = 0.0, 0.0
    for t in reversed(range(len(v))):
        delta = r[t] + gamma * next_value - v[t]
        next_adv = delta + gamma * lam * next_adv
        adv[t] = next_adv
        next_value = v[t]
    a = torch.tensor(adv, dtype=values.dtype)
    return a, a + values


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, clip: float | None
               ) -> torch.Tensor:
    """0.5 * max((V - R)^2, (clip(V, V_old +- c) - R)^2) per token (PPO value clipping)."""
    loss = (values - returns) ** 2
    if clip is not None:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns) ** 2)
    return 0.5 * loss


class Critic(nn.Linear):
    def __init__(self, hidden_size: int, gamma: float, lam: float, clip: float | None):
        super().__init__(hidden_size, 1)
        nn.init.zeros_(self.weight)
        nn.init.zeros_(self.bias)
        self.gamma, self.lam, self.clip = gamma, lam, clip

    def values(self, hidden: torch.Tensor) -> torch.Tensor:
        return self(hidden).squeeze(-1).float()

    def advantages(self, mb: MicroBatch, hidden: torch.Tensor, rewards: list[float]) -> None:
        """Per-token advantages and returns of every episode of `mb`, its reward on its last model token."""
        values = self.values(hidden)
        adv, ret = torch.zeros_like(values), torch.zeros_like(values)
        for j, s in enumerate(mb.sample_ids):
            idx = (mb.seq_index == j).nonzero().flatten()
            if len(idx):
                r = torch.zeros(len(idx))
                r[-1] = rewards[s]
                adv[idx], ret[idx] = gae(r, values[idx], self.gamma, self.lam)
        mb.values.adv, mb.values.old_values, mb.values.returns = adv, values, ret

    def loss(self, mb: MicroBatch, hidden: torch.Tensor) -> torch.Tensor:
        return value_loss(self.values(hidden), mb.values.old_values, mb.values.returns, self.clip)
