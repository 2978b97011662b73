"""`TrainConfig`: everything `temper train` needs. Its sections' values for the default recipe live in
temper/config/recipes/train.yaml (`temper train --print-config` shows them merged).

The default recipe: SmolLM2-135M-Instruct learns two-digit addition with GRPO (its base pass
rate is ~25-30%, greedy), evaluated before and after on 200 held-out problems (another seed,
never trained on), correctness only.
"""

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from temper.agent.config import AgentConfig
from temper.config import ConfigModel
from temper.engine.config import EngineConfig
from temper.generation import RemoteGenerationConfig
from temper.orchestrator.ray_config import RayConfig
from temper.rl.config import RLConfig
from temper.rollout_servers.vllm_config import VllmConfig
from temper.runtime import RuntimeConfig
from temper.sandbox.config import TaskMaxima

DEFAULT_SUITE = "arithmetic:op=add,digits=2,n=2000,seed=1"
DEFAULT_EVAL_SUITE = "arithmetic:op=add,digits=2,n=205,seed=9001"  # 200 distinct problems


class SuiteConfig(ConfigModel):
    spec: str  # a temper.envs suite spec, e.g. reasoning_gym:task=chain_sum,n=500
    weight: float = Field(1.0, gt=0)  # share of new groups (normalised over suites)
    priority: int = 0  # when slots are scarce, a higher priority is served first
    max_concurrency: int = Field(32, ge=1)  # episodes in flight for this suite (its sandbox capacity)


class RetryConfig(ConfigModel):
    max_attempts: int = Field(3, ge=1)  # tries of one episode before its task is quarantined
    backoff_s: float = Field(0.2, ge=0)  # first delay; doubles each retry
    backoff_max_s: float = Field(5.0, ge=0)


class FaultConfig(ConfigModel):
    """Fault injection, for tests and drills: rates per episode attempt."""

    sandbox_kill_rate: float = Field(0.0, ge=0, le=1)  # kill the episode's sandbox before the verifier
    worker_error_rate: float = Field(0.0, ge=0, le=1)  # raise inside the rollout worker
    seed: int = 0


class ReplayConfig(ConfigModel):
    enabled: bool = False
    capacity: int = Field(64, ge=1)  # groups kept
    ratio: float = Field(0.25, ge=0, lt=1)  # share of a batch's groups drawn from the buffer
    min_signal: float = Field(0.1, ge=0)  # mean |advantage| a group needs to enter the buffer


class CurriculumConfig(ConfigModel):
    enabled: bool = True
    min_groups: int = Field(2, ge=1)  # groups seen before a task's pass rate counts
    retire_above: float = Field(1.0, ge=0, le=1)  # pass rate >= this: too easy, retired
    park_below: float = Field(0.0, ge=0, le=1)  # pass rate <= this: hopeless for now, parked
    hard_below: float = Field(0.3, ge=0, le=1)  # pools: hard < hard_below <= medium < easy_above <= easy
    easy_above: float = Field(0.7, ge=0, le=1)


class OrchestratorConfig(ConfigModel):
    # remote: generate on an OpenAI-compatible server; vllm: on vLLM servers, started here or attached
    backend: Literal["local", "ray", "remote", "vllm"] = "local"
    remote: RemoteGenerationConfig = Field(default_factory=RemoteGenerationConfig)  # with backend: remote
    vllm: VllmConfig = Field(default_factory=VllmConfig)  # with backend: vllm
    ray: RayConfig = Field(default_factory=RayConfig)  # with backend: ray (cluster address, placement)
    num_workers: int = Field(1, ge=1)  # rollout workers (ray: one actor each, with its own engine)
    max_staleness: int = Field(1, ge=0)  # policy versions a trajectory may lag; 0 = synchronous
    group_size: int = Field(8, ge=1)  # samples per task, kept together (GRPO groups)
    batch_groups: int = Field(4, ge=1)  # groups per trainer step
    concurrency: int = Field(32, ge=1)  # episodes in flight over all suites
    partial_rollouts: bool = True  # False: weight updates wait for in-flight generations to finish
    # Zero-variance groups replaced by fresh ones per trained batch, while algorithm.filter.drop_zero_variance
    # has the trainer drop them (group estimators only); past it they go to the trainer, which drops them:
    # the step trains on fewer groups.
    max_refills: int = Field(8, ge=0)
    save_every: int = Field(1, ge=1)  # checkpoint (and consumption commit) every N steps
    async_checkpoints: bool = True  # written while the next step trains (one trainer process; checkpointer.py)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)


class TrainEvalConfig(ConfigModel):
    """`temper train`'s held-out evaluations, run by the evaluation harness (temper.evals)."""

    suite: str | None = DEFAULT_EVAL_SUITE  # held-out tasks; None: no evaluation
    n: int = Field(200, ge=1)  # tasks evaluated (the first n distinct tasks of the suite)
    before: bool = True
    after: bool = True
    temperature: float = Field(0.0, ge=0)  # of the held-out evaluation (greedy: one answer per task), not of rollouts
    max_turn_tokens: int | None = None  # None: agent.max_turn_tokens
    metric: str = "correctness"  # the reward component scored (correctness only, never format)
    every: int = Field(0, ge=0)  # also evaluate every N steps during training, at low priority (0: off)


class LoggingConfig(ConfigModel):
    progress: bool = True  # the live rich table (off: one log line per step)
    tensorboard: bool = False
    wandb: bool = False  # offline mode: wandb sync RUN_DIR/wandb later
    plots: bool = True


# Keys of a step's metrics row (metrics.jsonl, and each checkpoint's meta.json) that can rank checkpoints
# (algorithm.checkpoint.best_metric); a test checks a real run writes every one.
RANKING_METRICS = ("reward", "pass_rate", "trainer/reward_mean", "trainer/loss", "trainer/kl", "trainer/entropy")


class TrainConfig(ConfigModel):
    recipe: ClassVar[str | None] = "train"

    model: str = "smollm2-135m"
    suites: list[SuiteConfig] = Field(default_factory=lambda: [SuiteConfig(spec=DEFAULT_SUITE)])
    algorithm: RLConfig = Field(default_factory=RLConfig)
    engine: EngineConfig = Field(default_factory=EngineConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)  # the rollouts' agent (its temperature: theirs)
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    eval: TrainEvalConfig = Field(default_factory=TrainEvalConfig)
    max_steps: int = Field(16, ge=0)  # ~11 min on 2 idle cores; the measured gain is in docs/train.md#measured
    out: str | None = None  # run folder; default runs/train-<timestamp>
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    # The operator's maxima for task folders (task.toml's cpus, memory, storage, timeouts) and the internet
    # a task asking for it gets (task_max.internet, task_max.internet_hosts: docs/sandbox.md).
    task_max: TaskMaxima = Field(default_factory=TaskMaxima)

    @field_validator("suites")
    @classmethod
    def _some_suite(cls, v: list[SuiteConfig]) -> list[SuiteConfig]:
        if not v:
            raise ValueError("at least one suite is needed")
        return v

    @model_validator(mode="after")
    def _checks(self) -> "TrainConfig":
        ckpt = self.algorithm.checkpoint
        if ckpt.keep_last < 2:
            # resume loads the checkpoint the store last committed, which may be the one before the newest
            raise ValueError("algorithm.checkpoint.keep_last must be >= 2 (resume may need the one before last)")
        if ckpt.keep_best and ckpt.best_metric not in RANKING_METRICS:
            raise ValueError(f"algorithm.checkpoint.best_metric {ckpt.best_metric!r}: temper train ranks checkpoints "
                             f"by one of {', '.join(RANKING_METRICS)}")
        return self
