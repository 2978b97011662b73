"""`TrainConfig`: everything `temper train` needs, with defaults that run the default recipe on a CPU.

The default recipe: SmolLM2-135M-Instruct learns two-digit addition with GRPO (its base pass
rate is ~25-30%, greedy), evaluated before and after on 200 held-out problems (another seed,
never trained on), correctness only.
"""

from typing import Literal

from pydantic import Field, field_validator, model_validator

from temper.agent.config import agent_section
from temper.config import ConfigModel
from temper.engine.config import EngineConfig
from temper.generation import RemoteGenerationConfig
from temper.orchestrator.ray_config import RayConfig
from temper.rl.config import CheckpointConfig, FilterConfig, OptimConfig, RLConfig
from temper.rollout_servers.vllm_config import VllmConfig
from temper.runtime import RuntimeConfig

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
    dynamic_sampling: bool = True  # drop groups whose rewards are all equal and refill
    max_refills: int = Field(8, ge=0)  # per trained batch, past which a zero-variance group is trained anyway
    save_every: int = Field(1, ge=1)  # checkpoint (and consumption commit) every N steps
    retry: RetryConfig = Field(default_factory=RetryConfig)
    faults: FaultConfig = Field(default_factory=FaultConfig)
    replay: ReplayConfig = Field(default_factory=ReplayConfig)
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig)


# The default recipe's agent. SmolLM2's own default system prompt: the base pass rate on two-digit
# sums is ~2x that under a generic one (measured: 27% vs 14% greedy); "a + b = c" takes ~10 tokens.
# The harness gives up on an episode tool_grace_s after its episode_timeout_s.
TrainAgent = agent_section(
    system_prompt="You are a helpful AI assistant named SmolLM, trained by Hugging Face", temperature=0.8,
    max_turn_tokens=24, max_turns=1, max_answer_retries=0, max_context_tokens=1024, turn_timeout_s=600.0,
    episode_timeout_s=600.0)


class TrainEvalConfig(ConfigModel):
    """`temper train`'s held-out evaluations, run by the evaluation harness (temper.evals)."""

    suite: str | None = DEFAULT_EVAL_SUITE  # held-out tasks; None: no evaluation
    n: int = Field(200, ge=1)  # tasks evaluated (the first n distinct tasks of the suite)
    before: bool = True
    after: bool = True
    temperature: float = Field(0.0, ge=0)  # greedy: one deterministic answer per task
    max_turn_tokens: int | None = None  # None: agent.max_turn_tokens
    metric: str = "correctness"  # the reward component scored (correctness only, never format)
    every: int = Field(0, ge=0)  # also evaluate every N steps during training, at low priority (0: off)


class LoggingConfig(ConfigModel):
    progress: bool = True  # the live rich table (off: one log line per step)
    tensorboard: bool = False
    wandb: bool = False  # offline mode: wandb sync RUN_DIR/wandb later
    plots: bool = True


class TrainConfig(ConfigModel):
    model: str = "smollm2-135m"
    suites: list[SuiteConfig] = Field(default_factory=lambda: [SuiteConfig(spec=DEFAULT_SUITE)])
    algorithm: RLConfig = Field(default_factory=lambda: RLConfig(
        optim=OptimConfig(lr=3e-5, total_steps=40, warmup_steps=0, min_lr_ratio=1.0),
        filter=FilterConfig(drop_zero_variance=True),
        checkpoint=CheckpointConfig(keep_last=2, keep_best=False),
    ))
    engine: EngineConfig = Field(default_factory=lambda: EngineConfig(kv_budget_bytes=512 * 1024**2))
    agent: TrainAgent
    orchestrator: OrchestratorConfig = Field(default_factory=OrchestratorConfig)
    eval: TrainEvalConfig = Field(default_factory=TrainEvalConfig)
    max_steps: int = Field(16, ge=0)  # ~11 min on 2 idle cores; the measured gain is in docs/train.md#measured
    out: str | None = None  # run folder; default runs/train-<timestamp>
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @field_validator("suites")
    @classmethod
    def _some_suite(cls, v: list[SuiteConfig]) -> list[SuiteConfig]:
        if not v:
            raise ValueError("at least one suite is needed")
        return v

    @model_validator(mode="after")
    def _checks(self) -> "TrainConfig":
        if "temperature" not in self.algorithm.model_fields_set:
            # the trainer recomputes the distribution the rollouts sampled from (greedy: plain softmax)
            self.algorithm.temperature = self.agent.temperature or 1.0
        if self.algorithm.checkpoint.keep_last < 2:
            # resume loads the checkpoint the store last committed, which may be the one before the newest
            raise ValueError("algorithm.checkpoint.keep_last must be >= 2 (resume may need the one before last)")
        return self
