"""Typed configuration of the RL trainer and SFT. Every default runs on a CPU."""

from dataclasses import fields
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from temper.config import ConfigModel
from temper.runtime import RuntimeConfig


class AdvantageConfig(ConfigModel):
    # grpo: (r - group mean) [/ group std]; dr_grpo: r - group mean (pair with aggregation
    # seq_sum_norm); rloo: leave-one-out baseline; reinforce: running baseline; gae: value head.
    estimator: Literal["grpo", "dr_grpo", "rloo", "reinforce", "gae"] = "grpo"
    std_normalize: bool = True  # grpo only
    eps: float = 1e-6
    baseline_decay: float = 0.9  # reinforce: b <- decay * b + (1 - decay) * mean(r)
    gamma: float = 1.0  # gae
    lam: float = 0.95  # gae


class LossConfig(ConfigModel):
    clip_low: float = 0.2  # ratio floor 1 - clip_low
    clip_high: float = 0.28  # ratio ceiling 1 + clip_high (DAPO clip-higher)
    dual_clip: float | None = 3.0  # cap on -A * ratio for A < 0 (must be > 1); None disables
    aggregation: Literal["token_mean", "seq_mean", "seq_sum_norm"] = "token_mean"
    norm_length: int | None = None  # seq_sum_norm divisor per sequence; None: longest response in the step
    kl_coef: float = Field(0.0, ge=0)  # KL to the reference policy (default: the starting weights, frozen)
    kl_estimator: Literal["k1", "k3"] = "k3"
    entropy_coef: float = 0.0
    value_coef: float = 0.5  # gae only
    value_clip: float | None = 0.2


class OffPolicyConfig(ConfigModel):
    # Importance weights pi_old / mu between the trainer's recomputed logprobs (pi_old) and the
    # engine's behaviour logprobs (mu): truncated at `cap`, tokens outside [mask_low, mask_high] masked.
    recompute_logprobs: bool = True  # False: use behaviour logprobs as pi_old (no correction)
    tis: Literal["none", "token", "sequence"] = "token"
    cap: float = 2.0
    mask_low: float | None = None
    mask_high: float | None = None


class FilterConfig(ConfigModel):
    # DAPO dynamic sampling: a group all right or all wrong teaches a group estimator (grpo, dr_grpo, rloo)
    # nothing: the trainer drops it, and temper train's rollouts replace it (orchestrator.max_refills).
    drop_zero_variance: bool = True
    overlong: Literal["none", "mask", "penalty"] = "none"
    max_response_tokens: int = 1024  # penalty: the hard limit L_max
    overlong_buffer: int = 256  # penalty: the soft zone L_cache before L_max
    overlong_penalty: float = 1.0  # penalty at L_max (linear ramp over the buffer)


class OptimConfig(ConfigModel):
    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    warmup_steps: int = 0
    total_steps: int = 1000  # cosine decays to min_lr_ratio * lr at this optimizer step
    min_lr_ratio: float = 0.1
    grad_clip: float | None = 1.0
    # A staleness-aware learning rate (Zhang et al. 2016, "Staleness-aware Async-SGD"): "inverse" divides each
    # step's lr by the mean staleness of the samples it trains on, when above 1 (so max_staleness 0 and 1 are
    # unchanged). Adam's normalisation undoes a scaled loss, so it is the step size that is scaled. At
    # max_staleness 4 it trained significantly better than none (docs/train.md, "Staleness").
    staleness_lr: Literal["none", "inverse"] = "inverse"


class LoRAConfig(ConfigModel):
    enabled: bool = False
    rank: int = 8
    alpha: float = 16.0
    targets: list[str] = Field(default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"])


class TrainerConfig(ConfigModel):
    micro_batch_tokens: int = 4096  # token budget of one micro-batch (packed row or padded block)
    packing: bool = True  # False: one sequence per row, padded to the micro-batch's longest
    # packed samples with the same prompt (a group's) share one forward of it; the same logprobs and gradients
    share_prompts: bool = True
    mini_batches: int = 1  # optimizer steps per trainer step (PPO-style updates on the same data)
    # Activation checkpointing (each decoder layer recomputed in backward): on for every micro-batch, or else
    # for a micro-batch of at least `checkpoint_from_tokens` tokens, whose activations grow with its length
    # (None: never by length).
    gradient_checkpointing: bool = False
    checkpoint_from_tokens: int | None = Field(8192, ge=1)
    # The longest sequence the trainer takes: a longer one is cut to its first max_sequence_tokens tokens (its
    # reward stands), counted in the step's `truncated` and `truncated_tokens`. None: no limit (the agent's
    # agent.max_context_tokens bounds an episode).
    max_sequence_tokens: int | None = Field(None, ge=2)
    # pi_old from the update's own forward when there is one mini-batch (the same weights: the same numbers),
    # instead of a no-grad forward of its own: a third less compute per step (Trainer.folds_old_logprobs)
    fold_old_logprobs: bool = True
    # compute dtype: bf16 autocast over fp32 master weights, or fp32; auto = bf16 on CUDA, fp32 elsewhere (bf16 is
    # ~5x slower on CPUs without native bf16)
    dtype: Literal["auto", "float32", "bfloat16"] = "auto"
    logits_chunk: int = 1024  # tokens per chunk when turning hidden states into logprobs
    lora: LoRAConfig = Field(default_factory=LoRAConfig)
    # FSDP2 ranks `temper train` spawns for the trainer (gloo on CPU, NCCL on CUDA); 1: in the driver's process
    world_size: int = Field(1, ge=1)
    # Context parallelism: a sample longer than micro_batch_tokens is split across this many ranks (of
    # world_size) by ring attention; shorter ones are packed and shared out over all ranks as usual
    context_parallel: int = Field(1, ge=1)


class CheckpointConfig(ConfigModel):
    keep_last: int = Field(2, ge=0)
    keep_best: bool = False  # also keep the best checkpoint by best_metric (a key its command writes)
    best_metric: str | None = None
    best_mode: Literal["max", "min"] = "max"


GROUP_ESTIMATORS = ("grpo", "dr_grpo", "rloo")  # baselines from a group's other samples


class RLConfig(ConfigModel):
    advantages: AdvantageConfig = Field(default_factory=AdvantageConfig)
    loss: LossConfig = Field(default_factory=LossConfig)
    off_policy: OffPolicyConfig = Field(default_factory=OffPolicyConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)

    @property
    def drops_zero_variance(self) -> bool:
        """Whether the trainer drops zero-variance groups (dynamic sampling): the one switch, read by rollouts too."""
        return self.filter.drop_zero_variance and self.advantages.estimator in GROUP_ESTIMATORS

    @model_validator(mode="after")
    def _shardable(self) -> "RLConfig":
        if self.trainer.world_size > 1 and self.advantages.estimator == "gae":
            raise ValueError("trainer.world_size > 1 with advantages.estimator gae: the value head is not sharded "
                             "yet (use world_size 1)")
        t = self.trainer
        if t.world_size % t.context_parallel:
            raise ValueError(f"trainer.context_parallel: {t.context_parallel} must divide trainer.world_size "
                             f"({t.world_size}): each sequence is split across that many of the ranks")
        if t.context_parallel > 1 and self.off_policy.tis == "sequence":
            raise ValueError("trainer.context_parallel > 1 with off_policy.tis sequence: a sequence's ratio would "
                             "span ranks (use tis token or none)")
        return self


class SFTDataConfig(ConfigModel):
    path: str = ""  # JSONL, one chat transcript per line: {"messages": [{"role": ..., "content": ...}, ...]}
    max_tokens: int = 2048  # longer transcripts are cut
    train_on: Literal["assistant", "all"] = "assistant"


class SFTConfig(ConfigModel):
    recipe: ClassVar[str | None] = "sft"

    model: str = "smollm2-135m"  # a name or folder that temper.models.load_model accepts
    data: SFTDataConfig = Field(default_factory=SFTDataConfig)
    epochs: int = 1
    batch_size: int = 8  # transcripts per optimizer step
    out: str = "runs/sft"
    save_every: int = 0  # optimizer steps between checkpoints; 0: only at the end
    optim: OptimConfig = Field(default_factory=OptimConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    @model_validator(mode="after")
    def _one_process(self) -> "SFTConfig":
        if self.trainer.world_size != 1 or self.trainer.context_parallel != 1:
            raise ValueError("trainer.world_size and trainer.context_parallel: temper sft trains in one process (1); "
                             "FSDP2 and context-parallel ranks are temper train's (algorithm.trainer.*)")
        from temper.rl.stats import UpdateStats

        written = [f.name for f in fields(UpdateStats)]  # what each SFT checkpoint's meta.json records
        if self.checkpoint.keep_best and self.checkpoint.best_metric not in written:
            raise ValueError(f"checkpoint.best_metric {self.checkpoint.best_metric!r}: temper sft ranks checkpoints "
                             f"by one of {', '.join(written)}")
        return self
