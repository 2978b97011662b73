"""The trainer: trajectories in, a better policy out.

One `step` reads top to bottom: filter -> advantages -> samples -> micro-batches -> a no-grad pass
(pi_old, reference, values; off-policy weights and masks) -> loss weights -> for each mini-batch:
accumulate gradients over its micro-batches, clip, AdamW step -> metrics, policy_version + 1.
"""

import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from temper.rl import distributed as dist
from temper.rl.advantages import RunningBaseline, dr_grpo, gae, grpo, rloo
from temper.rl.batching import MicroBatch, Sample, collate, make_micro_batches, trajectory_sample
from temper.rl.checkpoint import load_trainer_checkpoint, save_trainer_checkpoint
from temper.rl.config import RLConfig
from temper.rl.filtering import filter_trajectories
from temper.rl.logprobs import micro_batch_logprobs
from temper.rl.lora import apply_lora, has_lora, merged_state_dict
from temper.rl.losses import clipped_policy_loss, kl_penalty, token_weights, value_loss
from temper.rl.off_policy import importance_weights
from temper.rl.optim import build_optimizer
from temper.trajectory import Trajectory

LossFn = Callable[[MicroBatch, dict[str, float]], torch.Tensor]


class Trainer:
    def __init__(self, model: nn.Module, cfg: RLConfig | None = None, ref_model: nn.Module | None = None,
                 pad_id: int = 0):
        self.cfg = cfg = cfg or RLConfig()
        if cfg.trainer.lora.enabled:
            lc = cfg.trainer.lora
            apply_lora(model, lc.rank, lc.alpha, lc.targets)
        model.gradient_checkpointing = cfg.trainer.gradient_checkpointing
        if dist.is_distributed():
            if cfg.advantages.estimator == "gae":
                raise NotImplementedError("the value head (gae) is not sharded yet: run it in one process")
            dist.shard_model(model)
        self.model = model.train()
        self.ref_model = ref_model.eval().requires_grad_(False) if ref_model is not None else None
        if cfg.loss.kl_coef > 0 and ref_model is None:
            raise ValueError("loss.kl_coef > 0 needs a reference model (Trainer(..., ref_model=...))")
        self.value_head = nn.Linear(model.config.hidden_size, 1) if cfg.advantages.estimator == "gae" else None
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)
        params = list(self.model.parameters()) + (list(self.value_head.parameters()) if self.value_head else [])
        self.optimizer, self.scheduler = build_optimizer(params, cfg.optim)
        self.baseline = RunningBaseline(cfg.advantages.baseline_decay)
        self.pad_id = pad_id
        self.step_count = 0  # optimizer steps taken
        self.policy_version = 0  # bumped once per `step`
        self.data_cursor: object = None  # the caller's position in its data, saved with checkpoints

    # ---- RL ----------------------------------------------------------------------------------
    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        start = time.perf_counter()
        cfg = self.cfg
        rewards_in = [t.reward for t in trajectories if t.trainable]
        f = filter_trajectories(trajectories, cfg.filter, cfg.advantages.estimator in ("grpo", "dr_grpo", "rloo"))
        stale = [self.policy_version - t.min_version() for t in trajectories if t.trainable and t.min_version() >= 0]
        metrics = {"reward_mean": sum(rewards_in) / max(1, len(rewards_in)), **f.stats,
                   "staleness_mean": sum(stale) / max(1, len(stale)), "staleness_max": float(max(stale, default=0))}
        if not f.trajectories:
            return {**metrics, "skipped": 1.0, "policy_version": float(self.policy_version)}
        adv = self._advantages(torch.tensor(f.rewards, dtype=torch.float32), f.groups)
        metrics.update(adv_mean=float(adv.mean()), adv_std=float(adv.std()) if len(adv) > 1 else 0.0,
                       adv_min=float(adv.min()), adv_max=float(adv.max()))
        samples = [trajectory_sample(t, a) for t, a, tr in zip(f.trajectories, adv.tolist(), f.train, strict=True)
                   if tr]
        rewards = [r for r, tr in zip(f.rewards, f.train, strict=True) if tr]
        minis = [list(range(len(samples)))[i::cfg.trainer.mini_batches] for i in range(cfg.trainer.mini_batches)]
        plans = [self._local_micro_batches([samples[i] for i in m]) for m in minis]
        sums: dict[str, float] = defaultdict(float)
        for mini, mbs in zip(minis, plans, strict=True):
            self._prepare(mbs, [rewards[i] for i in mini], len(mini), sums)
        for mbs in plans:
            self._update(mbs, self._policy_loss, sums)
        self.policy_version += 1
        return {**metrics, **self._finish(sums, start), "policy_version": float(self.policy_version)}

    def _advantages(self, rewards: torch.Tensor, groups: list[list[int]]) -> torch.Tensor:
        a = self.cfg.advantages
        if a.estimator == "grpo":
            return grpo(rewards, groups, a.std_normalize, a.eps)
        if a.estimator == "dr_grpo":
            return dr_grpo(rewards, groups)
        if a.estimator == "rloo":
            return rloo(rewards, groups)
        if a.estimator == "reinforce":
            return self.baseline(rewards)
        return torch.zeros_like(rewards)  # gae: per-token advantages come after the value pass

    def _local_micro_batches(self, samples: list[Sample]) -> list[MicroBatch]:
        """This rank's share (every world-th micro-batch), padded with empty ones so ranks stay in step."""
        t = self.cfg.trainer
        mbs = make_micro_batches(samples, t.micro_batch_tokens, t.packing, self.pad_id)
        mine = mbs[dist.rank()::dist.world_size()]
        n = dist.all_reduce_max(len(mine))
        while len(mine) < n:  # one zero-weight token: the same collectives, no contribution
            dummy = Sample(torch.tensor([self.pad_id, self.pad_id]), torch.tensor([0, 1]),
                           {k: torch.zeros(2) for k in ("adv", "behaviour")})
            mb = collate([dummy], [[0]], t.packing, self.pad_id)
            mb.sample_ids = [-1]
            mine.append(mb)
        return mine

    @torch.no_grad()
    def _prepare(self, mbs: list[MicroBatch], rewards: list[float], num_samples: int, sums: dict) -> None:
        """pi_old, reference logprobs and values; off-policy weights; the step-wide loss weights."""
        cfg, op = self.cfg, self.cfg.off_policy
        lengths = torch.zeros(num_samples)
        for mb in mbs:
            v = mb.values
            with self._autocast():
                hidden = None
                if op.recompute_logprobs or self.value_head is not None:
                    old, _, hidden = micro_batch_logprobs(self.model, mb, cfg.trainer.logits_chunk, with_hidden=True,
                                                          temperature=cfg.temperature)
                if not op.recompute_logprobs:  # the behaviour policy stands in for pi_old
                    old = v["behaviour"]
                v["old_logp"] = old = old.float()
                if self.ref_model is not None:
                    v["ref_logp"] = micro_batch_logprobs(self.ref_model, mb, cfg.trainer.logits_chunk,
                                                         temperature=cfg.temperature)[0].float()
            real = torch.tensor([s >= 0 for s in mb.sample_ids])[mb.seq_index]
            w, keep = importance_weights(old, v["behaviour"], mb.seq_index, len(mb.sample_ids), op.tis, op.cap,
                                         op.mask_low, op.mask_high)
            v["is_weight"], v["keep"] = w, (keep & real).float()
            d = (old - v["behaviour"]).double()[real]
            sums["mm_k3"] += float((torch.exp(d) - d - 1).sum())
            sums["mm_k1"] += float((-d).sum())
            sums["mm_n"] += float(d.numel())
            sums["is_masked"] += float((~keep[real]).sum())
            if self.value_head is not None:
                self._gae(mb, hidden, rewards)
            for j, s in enumerate(mb.sample_ids):
                if s >= 0:
                    lengths[s] = v["keep"][mb.seq_index == j].sum()
        lengths = dist.all_reduce_sum(lengths)
        weights = torch.tensor(token_weights([int(n) for n in lengths.tolist()], cfg.loss.aggregation,
                                             cfg.loss.norm_length))
        for mb in mbs:
            ids = torch.tensor([max(s, 0) for s in mb.sample_ids])
            real = torch.tensor([s >= 0 for s in mb.sample_ids], dtype=torch.float32)
            mb.values["weight"] = (weights[ids] * real)[mb.seq_index] * mb.values["keep"]

    def _gae(self, mb: MicroBatch, hidden: torch.Tensor, rewards: list[float]) -> None:
        v = mb.values
        values = self.value_head(hidden).squeeze(-1).float()
        adv, ret = torch.zeros_like(values), torch.zeros_like(values)
        for j, s in enumerate(mb.sample_ids):
            idx = (mb.seq_index == j).nonzero().flatten()
            if s < 0 or len(idx) == 0:
                continue
            r = torch.zeros(len(idx))
            r[-1] = rewards[s]
            adv[idx], ret[idx] = gae(r, values[idx], self.cfg.advantages.gamma, self.cfg.advantages.lam)
        v["adv"], v["old_values"], v["returns"] = adv, values, ret

    def _policy_loss(self, mb: MicroBatch, sums: dict[str, float]) -> torch.Tensor:
        c, v = self.cfg.loss, mb.values
        logp, entropy, hidden = micro_batch_logprobs(self.model, mb, self.cfg.trainer.logits_chunk, with_hidden=True,
                                                     temperature=self.cfg.temperature)
        pg, st = clipped_policy_loss(logp, v["old_logp"], v["adv"], c.clip_low, c.clip_high, c.dual_clip)
        per_token = pg * v["is_weight"]
        if self.ref_model is not None and c.kl_coef > 0:
            kl = kl_penalty(logp, v["ref_logp"], c.kl_estimator)
            per_token = per_token + c.kl_coef * kl
            sums["kl"] += float((kl.detach() * v["keep"]).sum())
        if c.entropy_coef > 0:
            per_token = per_token - c.entropy_coef * entropy
        if self.value_head is not None:
            values = self.value_head(hidden).squeeze(-1).float()
            vl = value_loss(values, v["old_values"], v["returns"], c.value_clip)
            per_token = per_token + c.value_coef * vl
            sums["value_loss"] += float((vl.detach() * v["keep"]).sum())
        keep = v["keep"]
        sums["tokens"] += float(keep.sum())
        sums["entropy"] += float((entropy.detach() * keep).sum())
        for k in ("clipped_high", "clipped_low", "clipped_dual"):
            if k in st:
                sums[k] += float((st[k].float() * keep).sum())
        sums["ratio_max"] = max(sums["ratio_max"], float(st["ratio"].max()) if st["ratio"].numel() else 0.0)
        return (per_token * v["weight"]).sum()

    # ---- SFT -----------------------------------------------------------------------------------
    def sft_step(self, samples: list[Sample]) -> dict[str, float]:
        """One optimizer step of token-mean negative log-likelihood on the samples' masked tokens."""
        start = time.perf_counter()
        mbs = self._local_micro_batches(samples)
        lengths = torch.zeros(len(samples))
        for mb in mbs:
            for j, s in enumerate(mb.sample_ids):
                if s >= 0:
                    lengths[s] = (mb.seq_index == j).sum()
        weights = torch.tensor(token_weights([int(n) for n in dist.all_reduce_sum(lengths).tolist()], "token_mean"))
        for mb in mbs:
            ids = torch.tensor([max(s, 0) for s in mb.sample_ids])
            real = torch.tensor([s >= 0 for s in mb.sample_ids], dtype=torch.float32)
            mb.values["weight"] = (weights[ids] * real)[mb.seq_index]

        def nll(mb: MicroBatch, sums: dict[str, float]) -> torch.Tensor:
            logp, entropy = micro_batch_logprobs(self.model, mb, self.cfg.trainer.logits_chunk)
            sums["tokens"] += float((mb.values["weight"] > 0).sum())
            sums["entropy"] += float((entropy.detach() * (mb.values["weight"] > 0)).sum())
            return -(logp * mb.values["weight"]).sum()

        sums: dict[str, float] = defaultdict(float)
        self._update(mbs, nll, sums)
        return self._finish(sums, start)

    # ---- shared machinery ------------------------------------------------------------------------
    def _autocast(self):
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.cfg.trainer.dtype == "bfloat16")

    def _update(self, mbs: list[MicroBatch], loss_fn: LossFn, sums: dict[str, float]) -> None:
        """Accumulate gradients over the micro-batches, clip, step AdamW and the schedule."""
        self.optimizer.zero_grad(set_to_none=True)
        scale = dist.world_size()  # FSDP averages gradients over ranks; the weights already sum to 1 globally
        for mb in mbs:
            with self._autocast():
                loss = loss_fn(mb, sums)
            (loss * scale).backward()
            sums["loss"] += float(loss.detach())
            sums["step_tokens"] += mb.num_tokens if mb.sample_ids != [-1] else 0
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.cfg.optim.grad_clip if self.cfg.optim.grad_clip is not None else float("inf")
        norm = dist.full_tensor(torch.nn.utils.clip_grad_norm_(params, max_norm))
        sums["grad_norm"] += float(norm)
        sums["updates"] += 1
        self.optimizer.step()
        self.scheduler.step()
        self.step_count += 1

    def _finish(self, sums: dict[str, float], start: float) -> dict[str, float]:
        keys = sorted(k for k in sums if k != "ratio_max")
        if dist.is_distributed():  # gradient norm is already global; everything else is summed over ranks
            t = dist.all_reduce_sum(torch.tensor([sums[k] for k in keys], dtype=torch.float64))
            sums.update({k: float(x) for k, x in zip(keys, t.tolist(), strict=True)})
            sums["grad_norm"] /= dist.world_size()
            sums["updates"] /= dist.world_size()
        n = max(sums["tokens"], 1.0)
        updates = max(sums["updates"], 1.0)
        out = {
            "loss": sums["loss"] / updates,
            "grad_norm": sums["grad_norm"] / updates,
            "entropy": sums["entropy"] / n,
            "clip_frac_high": sums["clipped_high"] / n,
            "clip_frac_low": sums["clipped_low"] / n,
            "clip_frac_dual": sums["clipped_dual"] / n,
            "kl": sums["kl"] / n,
            "lr": self.scheduler.get_last_lr()[0],
            "tokens": sums["step_tokens"],
            "tokens_per_s": sums["step_tokens"] / max(time.perf_counter() - start, 1e-9),
        }
        if sums["mm_n"]:
            out.update(mismatch_kl=sums["mm_k3"] / sums["mm_n"], mismatch_kl_k1=sums["mm_k1"] / sums["mm_n"],
                       is_masked_frac=sums["is_masked"] / sums["mm_n"])
        if self.value_head is not None:
            out["value_loss"] = sums["value_loss"] / n
        return out

    # ---- weights and checkpoints ----------------------------------------------------------------
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

    def load_checkpoint(self, path: str | Path) -> None:
        load_trainer_checkpoint(self, Path(path))

