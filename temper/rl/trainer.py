"""The trainer: trajectories in, a better policy out.

One `step` reads top to bottom: filter -> advantages -> samples -> this rank's micro-batches -> `_prepare`,
a no-grad pass (pi_old, reference logprobs, the critic's values; off-policy weights and masks; loss weights;
with one mini-batch pi_old is the update's own forward, detached: `folds_old_logprobs`) -> `update` per
mini-batch (accumulate gradients over its micro-batches, clip, AdamW step) -> `StepStats`, policy_version + 1.
SFT (sft.py) runs the same `micro_batches` and `update` with its own loss.
"""

import copy
import os
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from temper.rl import distributed as dist
from temper.rl.advantages import RunningBaseline, outcome_advantages
from temper.rl.batching import (
    MicroBatch,
    Sample,
    collate,
    make_micro_batches,
    trajectory_sample,
    truncate_sample,
)
from temper.rl.checkpoint import (
    CheckpointSnapshot,
    load_trainer_checkpoint,
    save_trainer_checkpoint,
    snapshot_checkpoint,
)
from temper.rl.config import GROUP_ESTIMATORS, RLConfig
from temper.rl.context_parallel import context_group, is_long, shard_micro_batch
from temper.rl.critic import Critic
from temper.rl.filtering import filter_trajectories
from temper.rl.logprobs import micro_batch_logprobs
from temper.rl.lora import apply_lora, has_lora, merged_state_dict
from temper.rl.losses import clipped_policy_loss, kl_penalty, set_loss_weights
from temper.rl.off_policy import importance_weights, mismatch_kl_sums
from temper.rl.optim import build_optimizer, staleness_lr_scale
from temper.rl.stats import StepStats, Sums, UpdateStats
from temper.trajectory import Trajectory

LossFn = Callable[[MicroBatch, Sums], torch.Tensor]


def bf16_autocast(dtype: str, device: torch.device) -> bool:
    """`trainer.dtype`: bf16 autocast (the weights stay fp32) when asked, or by default on CUDA."""
    return dtype == "bfloat16" or (dtype == "auto" and device.type == "cuda")


class Trainer:
    def __init__(self, model: nn.Module, cfg: RLConfig | None = None, ref_model: nn.Module | None = None,
                 pad_id: int = 0, temperature: float = 1.0):
        """`temperature`: the rollouts' sampling temperature (1.0 for greedy ones): logits are divided by it, as
        the engine did for the behaviour logprobs, so pi_old and pi are the distribution that was sampled."""
        self.cfg = cfg = cfg or RLConfig()
        if temperature <= 0:
            raise ValueError(f"temperature {temperature}: the rollouts' sampling temperature must be > 0")
        self.temperature = temperature
        if ref_model is None and cfg.loss.kl_coef > 0:  # the policy as it starts, frozen (before LoRA or sharding)
            ref_model = copy.deepcopy(model)
        if cfg.trainer.lora.enabled:
            lc = cfg.trainer.lora
            apply_lora(model, lc.rank, lc.alpha, lc.targets)
        self.device = next(model.parameters()).device  # the trainer follows the model: batches, autocast
        gae = cfg.advantages.estimator == "gae"
        self.context_group = None  # this rank's context-parallel group (context_parallel > 1)
        if dist.is_distributed():
            if gae:
                raise NotImplementedError("the value head (gae) is not sharded yet: run it in one process")
            if cfg.trainer.context_parallel > 1:
                self.context_group = context_group(cfg.trainer.context_parallel)
            dist.shard_model(model)
        self.model = model.train()
        self.ref_model = ref_model.eval().requires_grad_(False) if ref_model is not None else None
        a = cfg.advantages
        self.critic = Critic(model.config.hidden_size, a.gamma, a.lam, cfg.loss.value_clip) if gae else None
        if self.critic is not None:
            self.critic.to(self.device)
        params = list(self.model.parameters()) + (list(self.critic.parameters()) if self.critic else [])
        self.optimizer, self.lr_scheduler = build_optimizer(params, cfg.optim)
        self.baseline = RunningBaseline(cfg.advantages.baseline_decay)
        self.pad_id = pad_id
        self.step_count = 0  # optimizer steps taken
        self.policy_version = 0  # bumped once per `step`
        self.data_cursor: object = None  # the caller's position in its data, saved with checkpoints
        self.lr_scale = 1.0  # on this step's lr (optim.staleness_lr), set by `step` for its update

    def step(self, trajectories: list[Trajectory]) -> StepStats:
        start = time.perf_counter()
        cfg = self.cfg
        rewards_in = [t.reward for t in trajectories if t.trainable]
        f = filter_trajectories(trajectories, cfg.filter, cfg.advantages.estimator in GROUP_ESTIMATORS)
        stale = [self.policy_version - t.min_version() for t in trajectories if t.trainable and t.min_version() >= 0]
        stats = StepStats(self.policy_version, sum(rewards_in) / max(1, len(rewards_in)),
                          sum(stale) / max(1, len(stale)), max(stale, default=0), f.stats)
        if not f.trajectories:
            return stats
        adv = outcome_advantages(torch.tensor(f.rewards, dtype=torch.float32), f.groups, cfg.advantages, self.baseline)
        stats.adv_mean, stats.adv_std = float(adv.mean()), float(adv.std()) if len(adv) > 1 else 0.0
        stats.adv_min, stats.adv_max = float(adv.min()), float(adv.max())
        samples = [trajectory_sample(t, a) for t, a, tr in zip(f.trajectories, adv.tolist(), f.train, strict=True)
                   if tr]
        self.lr_scale = staleness_lr_scale([self.policy_version - t.min_version() for t, tr in
                                            zip(f.trajectories, f.train, strict=True) if tr and t.min_version() >= 0],
                                           cfg.optim.staleness_lr)
        rewards = [r for r, tr in zip(f.rewards, f.train, strict=True) if tr]
        samples, rewards = self._within_limit(samples, rewards, stats)
        if not samples:
            return stats
        stats.context_split = len(self._long(samples))
        minis = [list(range(len(samples)))[i::cfg.trainer.mini_batches] for i in range(cfg.trainer.mini_batches)]
        plans = [self.micro_batches([samples[i] for i in m]) for m in minis]
        sums = Sums()
        fold = self.folds_old_logprobs()
        for mini, mbs in zip(minis, plans, strict=True):
            self._prepare(mbs, [rewards[i] for i in mini], len(mini), sums, fold)
        for mbs in plans:
            self.update(mbs, self._policy_loss, sums)
        self.policy_version += 1
        stats.policy_version = self.policy_version
        stats.update = self.finish(sums, start)
        if cfg.optim.staleness_lr != "none":
            stats.update.lr_scale = self.lr_scale
        self.lr_scale = 1.0
        return stats

    def _within_limit(self, samples: list[Sample], rewards: list[float], stats: StepStats
                      ) -> tuple[list[Sample], list[float]]:
        """Samples longer than trainer.max_sequence_tokens cut to it, counted in `stats`; one left with no loss
        token is dropped."""
        limit = self.cfg.trainer.max_sequence_tokens
        if limit is None:
            return samples, rewards
        long = [s for s in samples if len(s.tokens) > limit]
        stats.truncated, stats.truncated_tokens = len(long), sum(len(s.tokens) - limit for s in long)
        cut = [truncate_sample(s, limit) for s in samples]
        keep = [i for i, s in enumerate(cut) if s.num_loss_tokens > 0]
        return [cut[i] for i in keep], [rewards[i] for i in keep]

    def micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        """This rank's share (every world-th micro-batch), then fillers so that ranks stay in step; values.keep
        is 1 on every real loss token. With context parallelism, first its share of the long samples its context
        group runs together (context_parallel.py)."""
        t = self.cfg.trainer
        long = self._long(samples)
        short = sorted(set(range(len(samples))) - set(long))
        mine = self._in_step(make_micro_batches(samples, t.micro_batch_tokens, t.packing, self.pad_id,
                                                t.share_prompts, short)[dist.rank()::dist.world_size()])
        if self.context_group is not None:
            groups, group = dist.world_size() // t.context_parallel, dist.rank() // t.context_parallel
            shares = [shard_micro_batch(collate(samples, [[i]], False, self.pad_id), self.context_group)
                      for i in long[group::groups]]
            mine = self._in_step(shares) + mine
        mine = [_to_device(mb, self.device) for mb in mine]
        for mb in mine:
            mb.values.keep = torch.full(mb.targets.shape, 0.0 if mb.filler else 1.0, device=self.device)
        return mine

    def _long(self, samples: list[Sample]) -> list[int]:
        """The samples a context group splits (none without context parallelism)."""
        t = self.cfg.trainer
        return [i for i, s in enumerate(samples) if self.context_group is not None and s.num_loss_tokens > 0
                and is_long(len(s.tokens), t.micro_batch_tokens, t.context_parallel)]

    def _in_step(self, mine: list[MicroBatch]) -> list[MicroBatch]:
        """`mine` and as many zero-weight fillers after it as the rank with the most micro-batches has more."""
        filler = Sample(torch.tensor([self.pad_id, self.pad_id]), torch.tensor([0, 1]),
                        {k: torch.zeros(2) for k in ("adv", "behaviour")})
        return mine + [replace(collate([filler], [[0]], self.cfg.trainer.packing, self.pad_id), filler=True)
                       for _ in range(dist.all_reduce_max(len(mine)) - len(mine))]

    def checkpoints(self, mb: MicroBatch) -> bool:
        """Whether this micro-batch's update recomputes each decoder layer in backward (activation checkpointing):
        always with gradient_checkpointing, else from checkpoint_from_tokens tokens on."""
        t = self.cfg.trainer
        return t.gradient_checkpointing or (t.checkpoint_from_tokens is not None
                                            and mb.num_tokens >= t.checkpoint_from_tokens)

    def folds_old_logprobs(self) -> bool:
        """Whether pi_old comes from the update's own forward (detached) instead of a no-grad pass of its own: with
        one mini-batch the update's forward runs on the weights pi_old is defined by, so the two are the same
        numbers and the pass is a third of a step's compute. Not where a mask would change the loss weights
        before the update (they count kept tokens) or where the critic needs that pass's hidden states."""
        t, op = self.cfg.trainer, self.cfg.off_policy
        return (t.fold_old_logprobs and t.mini_batches == 1 and op.recompute_logprobs and self.critic is None
                and op.mask_low is None and op.mask_high is None)

    @torch.no_grad()
    def _prepare(self, mbs: list[MicroBatch], rewards: list[float], num_samples: int, sums: Sums,
                 fold: bool = False) -> None:
        """pi_old, reference logprobs and the critic's advantages; off-policy weights; the step-wide loss weights.
        `fold`: pi_old (and so the off-policy weights) is left to the update's forward (folds_old_logprobs)."""
        cfg, op = self.cfg, self.cfg.off_policy
        for mb in mbs:
            v = mb.values
            with self._autocast():
                if (op.recompute_logprobs and not fold) or self.critic is not None:
                    old, _, hidden = micro_batch_logprobs(self.model, mb, cfg.trainer.logits_chunk, with_hidden=True,
                                                          temperature=self.temperature)
                if not op.recompute_logprobs:  # the behaviour policy stands in for pi_old
                    old = v.behaviour
                if self.ref_model is not None:
                    v.ref_logp = micro_batch_logprobs(self.ref_model, mb, cfg.trainer.logits_chunk,
                                                         temperature=self.temperature)[0].float()
                if self.critic is not None:
                    self.critic.advantages(mb, hidden, rewards)
            v.old_logp = None
            if not fold:
                self._off_policy(mb, old.float(), sums)
        set_loss_weights(mbs, num_samples, cfg.loss.aggregation, cfg.loss.norm_length)

    def _off_policy(self, mb: MicroBatch, old: torch.Tensor, sums: Sums) -> None:
        """pi_old of a micro-batch's loss tokens: its importance weights against the behaviour policy, its mask,
        and the train/inference mismatch it shows."""
        op, v = self.cfg.off_policy, mb.values
        v.old_logp = old
        w, keep = importance_weights(old, v.behaviour, mb.seq_index, len(mb.sample_ids), op.tis, op.cap,
                                     op.mask_low, op.mask_high)
        v.is_weight, v.keep = w, v.keep * keep
        if not mb.filler:
            k3, k1 = mismatch_kl_sums(old, v.behaviour)
            sums.mismatch_k3 += k3
            sums.mismatch_k1 += k1
            sums.mismatch_tokens += old.numel()
            sums.is_masked += float((~keep).sum())
            if v.version is not None:  # staleness 0: sampled by the weights pi_old was just computed with
                fresh = v.version == self.policy_version
                sums.fresh_abs_diff += float((old - v.behaviour).abs()[fresh].sum())
                sums.fresh_tokens += float(fresh.sum())

    def _policy_loss(self, mb: MicroBatch, sums: Sums) -> torch.Tensor:
        logp, entropy, hidden = micro_batch_logprobs(self.model, mb, self.cfg.trainer.logits_chunk, with_hidden=True,
                                                     temperature=self.temperature)
        if mb.values.old_logp is None:  # folded (folds_old_logprobs): this forward's, on the same weights
            with torch.no_grad():
                self._off_policy(mb, logp.detach().float(), sums)
        c, v, keep = self.cfg.loss, mb.values, mb.values.keep
        pg, clipped = clipped_policy_loss(logp, v.old_logp, v.adv, c.clip_low, c.clip_high, c.dual_clip)
        per_token = pg * v.is_weight
        if self.ref_model is not None and c.kl_coef > 0:
            kl = kl_penalty(logp, v.ref_logp, c.kl_estimator)
            per_token = per_token + c.kl_coef * kl
            sums.kl += float((kl.detach() * keep).sum())
        if c.entropy_coef > 0:
            per_token = per_token - c.entropy_coef * entropy
        if self.critic is not None:
            vl = self.critic.loss(mb, hidden)
            per_token = per_token + c.value_coef * vl
            sums.value_loss += float((vl.detach() * keep).sum())
        sums.loss_tokens += float(keep.sum())
        sums.entropy += float((entropy.detach() * keep).sum())
        sums.clipped_high += float((clipped["clipped_high"].float() * keep).sum())
        sums.clipped_low += float((clipped["clipped_low"].float() * keep).sum())
        if "clipped_dual" in clipped:
            sums.clipped_dual += float((clipped["clipped_dual"].float() * keep).sum())
        return (per_token * v.weight).sum()

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16,
                              enabled=bf16_autocast(self.cfg.trainer.dtype, self.device))

    def update(self, mbs: list[MicroBatch], loss_fn: LossFn, sums: Sums) -> None:
        """Accumulate gradients over the micro-batches, clip, step AdamW and the learning rate."""
        self.optimizer.zero_grad(set_to_none=True)
        scale = dist.world_size()  # FSDP averages gradients over ranks; the weights already sum to 1 globally
        for mb in mbs:
            self.model.gradient_checkpointing = self.checkpoints(mb)
            with self._autocast():
                loss = loss_fn(mb, sums)
            (loss * scale).backward()
            sums.loss += float(loss.detach())
            sums.forwarded += 0 if mb.filler else mb.num_tokens
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.cfg.optim.grad_clip if self.cfg.optim.grad_clip is not None else float("inf")
        sums.grad_norm += dist.clip_grad_norm_(params, max_norm)
        sums.updates += 1
        for g in self.optimizer.param_groups:  # the scheduler's next step sets lr afresh
            g["lr"] *= self.lr_scale
        self.optimizer.step()
        self.lr_scheduler.step()
        self.step_count += 1

    def finish(self, sums: Sums, start: float) -> UpdateStats:
        return sums.finish(self.lr_scheduler.get_last_lr()[0], start, value_loss=self.critic is not None)

    # ---- weights and checkpoints ----------------------------------------------------------------
    @property
    def dtype(self) -> str:
        """The parameters' dtype name ("float32"): what the rollout engines load the weights as."""
        return str(next(self.model.parameters()).dtype).removeprefix("torch.")

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        """Full (unsharded) weights under the plain model's names, LoRA merged: what the engine loads."""
        if has_lora(self.model):
            return merged_state_dict(self.model)
        if dist.is_distributed():
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            return get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return {k: t.detach().clone() for k, t in self.model.state_dict().items()}

    def save_checkpoint(self, root: str | Path, metrics: dict[str, float] | None = None,
                        tokenizer: object = None) -> Path:
        return save_trainer_checkpoint(self, Path(root), metrics or {}, tokenizer)

    def snapshot_checkpoint(self, metrics: dict[str, float] | None = None) -> CheckpointSnapshot:
        """This step's checkpoint copied in memory: `write_snapshot` writes it while the next step trains."""
        return snapshot_checkpoint(self, metrics or {})

    def load_checkpoint(self, path: str | Path) -> None:
        load_trainer_checkpoint(self, Path(path))

    @property
    def pids(self) -> list[int]:
        """The processes this trainer runs in (a TrainerGroup: one per rank)."""
        return [os.getpid()]

    def close(self) -> None:
        """Nothing to stop in one process (a TrainerGroup stops its ranks): the two are used alike."""


def _to_device(mb: MicroBatch, device: torch.device) -> MicroBatch:
    if device.type == "cpu":
        return mb
    move = {f: getattr(mb, f).to(device) for f in ("input_ids", "positions", "padding_mask", "index", "targets",
                                                   "seq_index")}
    return replace(mb, **move, values=mb.values.to(device))

