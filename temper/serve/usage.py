"""Per-request usage records (JSONL), cost from configured prices, and daily budgets with alerts.

A record holds counts and timings only; prompts and outputs are added when content logging
is on, and then only after redaction. API keys are never written: a key is named by a short
hash of itself.
"""

import hashlib
import json
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from temper.generation.prices import Prices
from temper.serve.config import UsageConfig
from temper.serve.metrics import Metrics
from temper.serve.redact import redact

log = logging.getLogger("temper.serve.usage")


def key_id(api_key: str | None) -> str:
    """A stable, non-reversible name for an API key (or 'anonymous')."""
    if not api_key:
        return "anonymous"
    return "key-" + hashlib.sha256(api_key.encode()).hexdigest()[:12]


@dataclass
class UsageRecord:
    request_id: str
    endpoint: str
    model: str
    variant: str
    route_reason: str
    key: str
    status: str = "ok"  # ok | error | aborted | rejected
    http_status: int = 200
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    ttft_s: float | None = None
    latency_s: float = 0.0
    tokens_per_s: float = 0.0
    cost_usd: float = 0.0
    policy_version: int | None = None
    finish_reasons: list[str] = field(default_factory=list)
    error: str | None = None
    ts: float = field(default_factory=time.time)
    prompt: Any = None  # only with log_content, redacted
    output: list[str] | None = None


class Budgets:
    """Daily (UTC) spend per key and in total; alerts once per threshold per scope per day."""

    def __init__(self, cfg: UsageConfig, metrics: Metrics):
        self.cfg, self.metrics = cfg.budgets, metrics
        self.spent: dict[tuple[str, str], float] = {}
        self.alerted: set[tuple[str, str, float]] = set()

    def _limits(self, key: str) -> list[tuple[str, float]]:
        out = []
        if self.cfg.per_key_daily_usd is not None:
            out.append((f"key:{key}", self.cfg.per_key_daily_usd))
        if self.cfg.daily_usd is not None:
            out.append(("day", self.cfg.daily_usd))
        return out

    def refusal(self, key: str) -> str | None:
        """With hard limits on, the reason a request from `key` is refused now (else None)."""
        if not self.cfg.hard_limit:
            return None
        day = _day()
        for scope, limit in self._limits(key):
            spent = self.spent.get((day, scope), 0.0)
            if spent >= limit:
                what = "this API key's daily budget" if scope.startswith("key:") else "the server's daily budget"
                return f"{what} is spent (${spent:.6f} of ${limit:.6f} today, UTC); it resets at 00:00 UTC"
        return None

    def add(self, key: str, cost: float) -> None:
        day = _day()
        for scope, limit in self._limits(key):
            total = self.spent[(day, scope)] = self.spent.get((day, scope), 0.0) + cost
            ratio = total / limit if limit > 0 else float("inf")
            label = "key" if scope.startswith("key:") else "day"
            self.metrics.budget_spent.labels(scope=label).set(min(ratio, 1e9))
            for th in self.cfg.alert_thresholds:
                if ratio >= th and (day, scope, th) not in self.alerted:
                    self.alerted.add((day, scope, th))
                    self.metrics.budget_alerts.labels(scope=label, threshold=f"{th:g}").inc()
                    log.warning("budget alert: %s has spent %.0f%% of its daily budget ($%.6f of $%.6f)",
                                scope, 100 * ratio, total, limit)


class UsageLog:
    def __init__(self, cfg: UsageConfig, metrics: Metrics):
        self.cfg, self.metrics = cfg, metrics
        self.budgets = Budgets(cfg, metrics)
        self.path = Path(cfg.path) if cfg.path else None
        self._lock = threading.Lock()
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def prices(self, variant: str) -> Prices:
        return self.cfg.prices.get(variant) or self.cfg.prices.get("standard") or Prices()

    def finish(self, rec: UsageRecord, prompt: Any = None, outputs: list[str] | None = None) -> UsageRecord:
        """Cost, budgets, metrics and the JSONL line for one finished (or failed) request."""
        rec.cost_usd = self.prices(rec.variant).cost(rec.prompt_tokens, rec.completion_tokens,
                                                     rec.cached_prompt_tokens)
        gen_time = rec.latency_s - (rec.ttft_s or 0.0)
        rec.tokens_per_s = rec.completion_tokens / rec.latency_s if rec.latency_s > 0 else 0.0
        m, v = self.metrics, rec.variant
        m.requests.labels(variant=v, endpoint=rec.endpoint, status=rec.status).inc()
        m.tokens.labels(variant=v, kind="prompt").inc(rec.prompt_tokens)
        m.tokens.labels(variant=v, kind="cached_prompt").inc(rec.cached_prompt_tokens)
        m.tokens.labels(variant=v, kind="completion").inc(rec.completion_tokens)
        if rec.status == "ok":
            if rec.ttft_s is not None:
                m.ttft.labels(variant=v).observe(rec.ttft_s)
            m.latency.labels(variant=v).observe(rec.latency_s)
            if rec.completion_tokens and gen_time >= 0:
                m.rate.labels(variant=v).observe(rec.tokens_per_s)
        if rec.cost_usd:
            m.cost.labels(variant=v).inc(rec.cost_usd)
            self.budgets.add(rec.key, rec.cost_usd)
        if self.cfg.log_content:
            rec.prompt = _redact_any(prompt)
            rec.output = [redact(o) for o in outputs] if outputs is not None else None
        self._write(rec)
        return rec

    def _write(self, rec: UsageRecord) -> None:
        if self.path is None:
            return
        data = {k: v for k, v in asdict(rec).items() if v is not None or k in ("ttft_s",)}
        line = json.dumps(data, ensure_ascii=False)
        with self._lock, self.path.open("a") as f:
            f.write(line + "\n")


def _redact_any(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [_redact_any(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_any(v) for k, v in value.items()}
    return value  # token ids, numbers: nothing personal to redact


def _day() -> str:
    return time.strftime("%Y-%m-%d", time.gmtime())
