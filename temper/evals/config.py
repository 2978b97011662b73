"""Evaluation settings: one pydantic section, defaults that run on a 2-core CPU."""

from pydantic import Field

from temper.agent.config import agent_section
from temper.config import ConfigModel
from temper.engine import EngineConfig
from temper.runtime import RuntimeConfig


class EvalSampling(ConfigModel):
    # None: greedy for one sample per task, 0.8 for several (the HumanEval paper's pass@10 setting).
    temperature: float | None = Field(None, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    seed: int = 0  # sample i of a task uses seed + i, so reruns (and resumed runs) draw the same samples


# The agent under evaluation; its temperature and top_p are `sampling`'s.
EvalAgent = agent_section(max_turns=4, max_turn_tokens=384, max_context_tokens=8192, turn_timeout_s=600.0,
                          episode_timeout_s=1800.0)


class Prices(ConfigModel):
    """Prices per million tokens, for the cost of each item (defaults: a small hosted model)."""

    input_per_m: float = Field(0.10, ge=0.0)
    output_per_m: float = Field(0.40, ge=0.0)

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return (tokens_in * self.input_per_m + tokens_out * self.output_per_m) / 1e6


class GridConfig(ConfigModel):
    """The long-context grid: `longctx` tasks at every (length, depth) cell."""

    # haystack tokens (~4 characters each); with the prompt around it the longest fits an 8K context
    lengths: list[int] = Field(default_factory=lambda: [512, 1024, 2048, 4096, 7680])
    depths: list[float] = Field(default_factory=lambda: [0.0, 0.25, 0.5, 0.75, 1.0])
    # retrieval, multi-key retrieval, multi-hop tracing, aggregation
    tasks: list[str] = Field(default_factory=lambda: ["niah", "multi_niah", "vartrack", "freq"])
    n: int = Field(4, ge=1)  # items per cell (the task kinds alternate over them)
    haystack: str = "essays"
    seed: int = 0
    threshold: float = Field(0.85, gt=0.0, le=1.0)  # effective length: score >= threshold x short-context score
    # Items in flight during the grid: 1 keeps latency curves free of queueing behind other items.
    concurrency: int = Field(1, ge=1)


class EvalConfig(ConfigModel):
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
    grid: GridConfig = GridConfig()
    prices: Prices = Prices()
    sampling: EvalSampling = EvalSampling()
    agent: EvalAgent
    engine: EngineConfig = EngineConfig()
    runtime: RuntimeConfig = RuntimeConfig()

    def temperature(self) -> float:
        if self.sampling.temperature is not None:
            return self.sampling.temperature
        return 0.0 if self.samples == 1 else 0.8
