"""Evaluation settings: one pydantic section, defaults that run on a 2-core CPU."""

from typing import Any, ClassVar

from pydantic import Field, model_validator

from temper.agent.config import AgentConfig
from temper.config import ConfigModel
from temper.engine import EngineConfig
from temper.generation.prices import Prices
from temper.runtime import RuntimeConfig
from temper.sandbox.config import TaskMaxima

# The agent's temperature when the configuration names none: greedy for one sample per task, this for
# several (the HumanEval paper's pass@10 setting).
SAMPLED_TEMPERATURE = 0.8


class GridConfig(ConfigModel):
    """The long-context grid: `longctx` tasks at every (length, depth) cell."""

    # haystack tokens (~4 characters each); with the prompt around it the longest fits an 8K context
    lengths: list[int] = Field(default_factory=lambda: [512, 1024, 2048, 4096, 7680])
    depths: list[float] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    # retrieval, multi-key retrieval, multi-hop tracing, aggregation
    tasks: list[str] = Field(default_factory=lambda: ["niah", "multi_niah", "vartrack", "freq"])
    n: int = Field(20, ge=1)  # items per cell (the task kinds alternate over them)
    haystack: str = "essays"
    seed: int = 0
    threshold: float = Field(0.85, gt=0.0, le=1.0)  # effective length: score >= threshold x short-context score
    ruler_threshold: float = Field(0.856, gt=0.0, le=1.0)  # effective_length_ruler: score >= this (absolute)
    # Items in flight during the grid: 1 keeps latency curves free of queueing behind other items.
    concurrency: int = Field(1, ge=1)


class EvalConfig(ConfigModel):
    recipe: ClassVar[str | None] = "eval"

    model: str = "smollm2-135m"
    # An OpenAI-compatible server to evaluate (temper serve, vLLM, SGLang); `model` then names the
    # tokenizer (and, unless endpoint_model is set, the server's model name). None: an in-process engine.
    endpoint: str | None = None
    endpoint_model: str | None = None
    # suite specs, e.g. humaneval, terminal, noisy:suite=(humaneval),rate=0.05
    suites: list[str] = Field(default_factory=list)
    samples: int = Field(1, ge=1)  # samples per task (pass@k for every k <= samples)
    limit: int | None = Field(None, ge=1)  # only the first N tasks of each suite (a documented subset)
    start: int = Field(0, ge=0)  # skip this many tasks first: with limit, the window tasks[start:start+limit]
    oracle: bool = False  # run the suites' reference solutions instead of a model
    out: str = "runs/eval"
    concurrency: int = Field(4, ge=1)  # items in flight at once (the knob that keeps eval below training)
    pass_threshold: float = 1.0  # a sample counts as correct for pass@k when its reward reaches this
    retry_failures: bool = True  # on resume, rerun items that ended in an infrastructure failure
    resamples: int = Field(2000, ge=100)  # bootstrap resamples for confidence intervals
    progress: bool = True  # live progress bar on stderr
    seed: int = 0  # sample i of a task draws with seed + i: reruns (and resumed runs) draw the same samples
    grid: GridConfig = GridConfig()
    prices: Prices = Prices()  # per million tokens, for each item's cost (cached prompt tokens are not counted)
    # The agent under evaluation, sampling at agent.temperature / agent.top_p. Unset, the temperature is
    # derived from `samples`: 0 (greedy) for one sample per task, SAMPLED_TEMPERATURE for several.
    agent: AgentConfig = AgentConfig()
    # The operator's maxima for task folders (task.toml's cpus, memory, storage, timeouts) and the internet
    # a task asking for it gets (task_max.internet, task_max.internet_hosts: docs/sandbox.md).
    task_max: TaskMaxima = TaskMaxima()
    engine: EngineConfig = EngineConfig()
    runtime: RuntimeConfig = RuntimeConfig()

    def sandbox_provider(self) -> Any:
        """Where the episodes get their sandboxes: fresh ones, under the operator's `task_max`."""
        from temper.envs.sandboxes import SandboxProvider
        from temper.sandbox import SandboxConfig

        return SandboxProvider(SandboxConfig(task_max=self.task_max))

    @model_validator(mode="before")
    @classmethod
    def _derived_temperature(cls, data: Any) -> Any:
        if isinstance(data, dict):
            agent = data.get("agent")
            if not isinstance(agent, dict) or "temperature" not in agent:
                try:
                    greedy = int(data.get("samples", 1)) <= 1
                except (TypeError, ValueError):
                    greedy = True  # a bad `samples` is reported by its own field's validation
                agent = {**(agent if isinstance(agent, dict) else {}),
                         "temperature": 0.0 if greedy else SAMPLED_TEMPERATURE}
                data = {**data, "agent": agent}
        return data
