"""`ServeConfig`: everything `temper serve` needs, with defaults that run on a 2-core CPU; and
`RemoteGenerationConfig`, how a client (the orchestrator, the evals) reaches such a server."""


from typing import ClassVar

from pydantic import Field, model_validator

from temper.config import ConfigModel
from temper.engine.config import EngineConfig
from temper.generation.prices import Prices
from temper.runtime import RuntimeConfig
from temper.serve.constraints import GrammarLimits


class QueueConfig(ConfigModel):
    # Requests admitted at once (running or waiting in the engine); beyond it: 429 + Retry-After.
    max_requests: int = Field(64, ge=1)
    retry_after_s: int = Field(1, ge=0)
    shutdown_grace_s: float = Field(10.0, ge=0)  # in-flight requests get this long to finish, then abort
    # Sequences (prompts x n) in flight at once: what the engine holds; beyond it: 429 + Retry-After.
    max_sequences: int = Field(256, ge=1)
    max_sequences_per_request: int = Field(64, ge=1)  # one request's prompts x n; beyond it: 400 naming n


class ABConfig(ConfigModel):
    """A/B split for `M:auto`: a stable share of user keys goes to the fast variant."""

    enabled: bool = False
    fast_fraction: float = Field(0.5, ge=0, le=1)
    salt: str = "temper-ab"  # change it to draw a new assignment


class RoutingConfig(ConfigModel):
    """How `M:auto` picks a variant. First rule that applies wins: explicit hints, load, A/B, prompt length."""

    # A latency budget (header X-Latency-Budget-Ms or body latency_budget_ms) below this picks fast.
    fast_below_latency_ms: float = Field(5000.0, ge=0)
    # Task types (X-Task-Type or task_type) whose outputs copy their input: speculation pays there.
    fast_task_types: list[str] = Field(default_factory=lambda: ["code", "edit", "extract", "rag", "summarize"])
    standard_task_types: list[str] = Field(default_factory=lambda: ["chat", "creative"])
    # Above this many requests in flight, speculation's extra verify work costs the batch: standard.
    max_load_for_fast: int = Field(8, ge=0)
    # Prompts at least this long (tokens) go fast: long inputs are what n-gram drafts copy from.
    min_prompt_tokens_fast: int = Field(256, ge=0)
    default: str = Field("standard", pattern="^(standard|fast)$")
    ab: ABConfig = Field(default_factory=ABConfig)


class BudgetConfig(ConfigModel):
    per_key_daily_usd: float | None = Field(None, ge=0)  # spend of one API key per UTC day
    daily_usd: float | None = Field(None, ge=0)  # spend of the whole server per UTC day
    alert_thresholds: list[float] = Field(default_factory=lambda: [0.5, 0.8, 1.0])  # shares of a budget
    hard_limit: bool = False  # True: a key or day over budget gets 429 with the reason


class UsageConfig(ConfigModel):
    path: str | None = "runs/serve/usage.jsonl"  # per-request JSONL records; None: not written
    log_content: bool = False  # store prompts and outputs (redacted: e-mails, phones, cards, keys)
    # per variant (standard, fast); a variant not named here costs Prices()'s defaults
    prices: dict[str, Prices] = Field(default_factory=dict)
    budgets: BudgetConfig = Field(default_factory=BudgetConfig)


class ServeConfig(ConfigModel):
    recipe: ClassVar[str | None] = "serve"

    model: str = "smollm2-135m"  # a bundled name, an HF folder, a GGUF file or a Hub id
    served_name: str | None = None  # the API's model name; default: the bundled name or folder name
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)  # 0: any free port (printed at start)
    engine: EngineConfig = Field(default_factory=EngineConfig)  # the recipe: n-gram speculation (fast variant)
    queue: QueueConfig = Field(default_factory=QueueConfig)
    routing: RoutingConfig = Field(default_factory=RoutingConfig)
    usage: UsageConfig = Field(default_factory=UsageConfig)
    max_tokens_default: int = Field(256, ge=1)  # when a request names none
    grammar: GrammarLimits = Field(default_factory=GrammarLimits)
    # The operator's token (sent as `Authorization: Bearer TOKEN`), read from a file or an environment
    # variable. Weight loads, version changes, /pause, /resume and bulk aborts need it; with neither set,
    # those routes answer 403.
    admin_token_file: str | None = None
    admin_token_env: str | None = None
    weights_dirs: list[str] = Field(default_factory=list)  # the only folders weights load from (and below)
    max_pause_s: float = Field(120.0, gt=0)  # a /pause lapses (the server resumes by itself) after this long
    runtime: RuntimeConfig = Field(default_factory=RuntimeConfig)

    @model_validator(mode="after")
    def _fast_needs_a_proposer(self) -> "ServeConfig":
        if self.engine.speculative.method != "ngram":
            raise ValueError("engine.speculative.method must be 'ngram': the fast variant is n-gram speculation")
        return self
