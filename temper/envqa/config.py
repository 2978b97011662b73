"""Configuration of `temper envqa`: what to check, how hard, and where the report goes.

Every field has a default that runs on a CPU; `--set key=value` reaches any of them.
"""

from typing import ClassVar

from pydantic import Field

from temper.agent.config import AgentConfig
from temper.config import ConfigModel
from temper.sandbox.config import TaskMaxima


class EnvQAConfig(ConfigModel):
    recipe: ClassVar[str | None] = "envqa"

    suite: str = "terminal"  # the suite spec whose tasks are checked
    out: str = "runs/envqa"  # report folder; a rerun into it skips tasks already checked
    # Oracle reproducibility: runs in fresh (reset) sandboxes; reward and components must agree.
    oracle_runs: int = Field(3, ge=1)
    pass_threshold: float = 1.0  # a reward at or above it is a pass
    # Resource fit: the oracle must leave at least this share of the task's time and memory unused.
    min_margin: float = Field(0.25, ge=0, lt=1)
    # Policy pass rate (skipped with policy=false / --no-policy).
    policy: bool = True
    model: str = "smollm2-135m"
    samples: int = Field(8, ge=1)  # k samples per task, one GRPO group
    agent: AgentConfig = AgentConfig()  # the recipe keeps policy episodes short: a pass rate, not a benchmark
    too_easy_at: float = Field(0.9, gt=0, le=1)  # pass rate at or above it: too easy
    seed: int = 0
    # Duplicates: MinHash LSH over normalised instruction + files.
    dup_threshold: float = Field(0.8, gt=0, le=1)
    num_perm: int = Field(128, ge=16)
    shingle: int = Field(5, ge=1)  # tokens per shingle
    # Contamination: n-gram overlap with evaluation suites (humaneval and every spec added here).
    against: list[str] = Field(default_factory=lambda: ["humaneval"])
    ngram: int = Field(13, ge=4)
    # Concurrency: tasks checked at once; each holds one sandbox of the warm pool at a time.
    concurrency: int = Field(2, ge=1)
    # The operator's maxima for task folders (task.toml's cpus, memory, storage, timeouts) and the internet
    # a task asking for it gets (task_max.internet, task_max.internet_hosts: docs/sandbox.md).
    task_max: TaskMaxima = TaskMaxima()
    limit: int | None = Field(None, ge=1)  # only the first N tasks (smoke runs)
