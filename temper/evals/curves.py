"""Latency and cost against context length, from the grid's records: time to first token, time per
output token, peak memory and cost per item (configurable prices per million tokens)."""

from typing import Any

from temper.evals.config import Prices
from temper.evals.metering import mean
from temper.evals.records import ItemRecord


def curves(by_length: dict[int, list[ItemRecord]], prices: Prices) -> dict[str, Any]:
    """One point per grid length; `prompt_tokens` is the measured x axis (the model's own tokens)."""
    points = []
    for length, records in sorted(by_length.items()):
        ok = [r for r in records if r.ok]
        peak = [r.peak_mem_mb for r in ok if r.peak_mem_mb is not None]
        points.append({
            "length": length,
            "items": len(ok),
            "prompt_tokens": _r(mean([float(r.tokens_in) for r in ok])),
            "output_tokens": _r(mean([float(r.tokens_out) for r in ok])),
            "ttft_s": _r(mean([r.ttft_s for r in ok])),
            "tpot_s": _r(mean([r.tpot_s for r in ok])),
            "latency_s": _r(mean([r.latency_s for r in ok])),
            "peak_mem_mb": max(peak) if peak else None,  # the process's peak resident memory
            "kv_cache_mb": _r(mean([r.info.get("kv_cache_mb") for r in ok])),  # the item's own KV cache
            "cost_per_item": _r(mean([prices.cost(r.tokens_in, r.tokens_out) for r in ok]), 9),
        })
    return {"prices": prices.model_dump(), "points": points}


def _r(x: float | None, digits: int = 5) -> float | None:
    return None if x is None else round(x, digits)
