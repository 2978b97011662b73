"""Resource fit: the oracle finishes within the task's time and memory limits, with margin.

margin = 1 - used / limit (of the slowest and the largest of the oracle runs); a run stopped by a
limit, or a margin under `min_margin`, makes the task `too-slow`: an agent, slower than the
reference solution, would run out."""

from typing import Any

from temper.agent.config import AgentConfig
from temper.envs.taskfolder import TaskFolder


def limits_of(folder: TaskFolder | None) -> tuple[float, int | None]:
    """(seconds, MiB) the agent phase may use: the task folder's, else an agent's default episode timeout."""
    if folder is not None:
        return folder.agent_timeout_s, folder.memory_mb
    return AgentConfig().episode_timeout_s, None


def check_resources(runs: list[dict[str, Any]], folder: TaskFolder | None, min_margin: float) -> dict[str, Any]:
    time_limit, mem_limit = limits_of(folder)
    secs = [r["oracle_s"] for r in runs if r.get("oracle_s") is not None]
    rss = [r["peak_rss_mb"] for r in runs if r.get("peak_rss_mb") is not None]
    hit = sorted({r["limit"] for r in runs if r.get("limit") in ("wall_time", "cpu", "memory")})
    out: dict[str, Any] = {"time_limit_s": time_limit, "memory_limit_mb": mem_limit, "limits_hit": hit,
                           "max_oracle_s": max(secs) if secs else None, "peak_rss_mb": max(rss) if rss else None,
                           "time_margin": None, "memory_margin": None}
    if secs:
        out["time_margin"] = round(1 - max(secs) / time_limit, 4)
    if rss and mem_limit:
        out["memory_margin"] = round(1 - max(rss) / mem_limit, 4)
    margins = [m for m in (out["time_margin"], out["memory_margin"]) if m is not None]
    out["too_slow"] = bool(hit) or any(m < min_margin for m in margins)
    return out
