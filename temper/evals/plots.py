"""PNG plots (matplotlib, Agg backend: no display needed): scores with CIs, the grid heatmap, the
depth profile, latency/cost curves, and the per-suite differences of a comparison."""

import math
from pathlib import Path
from typing import Any

from temper.runtime import pyplot

plt = pyplot()


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _short(name: str, width: int = 28) -> str:
    return name if len(name) <= width else name[: width - 1] + "…"


def _ci_bars(ax: Any, names: list[str], means: list[float], lows: list[float], highs: list[float]) -> None:
    err = [[m - lo for m, lo in zip(means, lows, strict=True)], [hi - m for m, hi in zip(means, highs, strict=True)]]
    ax.barh(range(len(names)), means, xerr=err, capsize=4, color="#4c72b0")
    ax.set_yticks(range(len(names)), [_short(n) for n in names])
    ax.invert_yaxis()


def _finite(*xs: Any) -> bool:
    """Numbers a bar can show: a summary read from disk may hold null, NaN or infinities."""
    return all(isinstance(x, int | float) and math.isfinite(x) for x in xs)


def suite_scores(summary: dict[str, Any], path: Path) -> Path | None:
    rows = [(s, e) for s, e in summary.get("suites", {}).items()
            if _finite(e.get("mean_reward"), e.get("ci_low"), e.get("ci_high"))]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1.2))
    _ci_bars(ax, [s for s, _ in rows], [e["mean_reward"] for _, e in rows], [e["ci_low"] for _, e in rows],
             [e["ci_high"] for _, e in rows])
    ax.set_xlabel("mean reward (95% bootstrap CI)")
    ax.set_xlim(0, 1.05)
    return _save(fig, path)


def heatmap(grid: dict[str, Any], path: Path) -> Path:
    import numpy as np

    acc = np.array([[np.nan if v is None else v for v in row] for row in grid["accuracy"]], dtype=float).T
    fig, ax = plt.subplots(figsize=(1.1 * len(grid["lengths"]) + 2.5, 0.6 * len(grid["depths"]) + 1.8))
    im = ax.imshow(acc, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(grid["lengths"])), [str(L) for L in grid["lengths"]])
    ax.set_yticks(range(len(grid["depths"])), [f"{d:g}" for d in grid["depths"]])
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("depth of the key information")
    for (i, j), v in np.ndenumerate(acc):
        ax.text(j, i, "–" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=8)
    eff = grid.get("effective_length")
    ax.set_title(f"long-context accuracy (effective length: {eff if eff is not None else 'undefined'})")
    fig.colorbar(im, ax=ax)
    return _save(fig, path)


def depth_profile(grid: dict[str, Any], path: Path) -> Path:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.6))
    depths = [float(d) for d in grid["depth_profile"]]
    a1.plot(depths, [v if v is not None else float("nan") for v in grid["depth_profile"].values()], "o-")
    a1.set(xlabel="depth", ylabel="accuracy", ylim=(-0.05, 1.05),
           title=f"by depth ({'+'.join(grid['depth_profile_kinds']) or 'no depth-sensitive kind'})")
    lengths = [int(L) for L in grid["by_length"]]
    a2.plot(lengths, [v if v is not None else float("nan") for v in grid["by_length"].values()], "o-", label="all")
    for kind, scores in grid["by_kind"].items():
        a2.plot(lengths, [v if v is not None else float("nan") for v in scores.values()], ".--", label=kind)
    if grid.get("base_score"):
        a2.axhline(grid["threshold"] * grid["base_score"], color="grey", lw=0.8, ls=":", label="threshold")
    a2.set(xlabel="context length (tokens)", ylabel="accuracy", ylim=(-0.05, 1.05), title="by length")
    a2.set_xscale("log", base=2)
    a2.legend(fontsize=7)
    return _save(fig, path)


def cost_curves(curves: dict[str, Any], path: Path) -> Path:
    pts = curves["points"]
    x = [p["prompt_tokens"] or p["length"] for p in pts]
    fig, axes = plt.subplots(1, 5, figsize=(18, 3.4))
    for ax, key, label in zip(axes, ("ttft_s", "tpot_s", "peak_mem_mb", "kv_cache_mb", "cost_per_item"),
                              ("time to first token (s)", "time per output token (s)", "peak process memory (MiB)",
                               "KV cache per item (MiB)", "cost per item ($)"), strict=True):
        ax.plot(x, [p.get(key) if p.get(key) is not None else float("nan") for p in pts], "o-")
        ax.set(xlabel="prompt tokens", title=label)
    return _save(fig, path)


def compare_diffs(cmp: dict[str, Any], path: Path) -> Path | None:
    rows = [(s, e) for s, e in cmp["suites"].items() if _finite(e.get("diff"), e.get("ci_low"), e.get("ci_high"))]
    if not rows:
        return None
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(rows) + 1.2))
    _ci_bars(ax, [s for s, _ in rows], [e["diff"] for _, e in rows], [e["ci_low"] for _, e in rows],
             [e["ci_high"] for _, e in rows])
    for patch, (_, e) in zip(ax.patches, rows, strict=True):
        patch.set_color({"improved": "#55a868", "regressed": "#c44e52"}.get(e["change"], "#8c8c8c"))
    ax.axvline(0, color="black", lw=0.8)
    ax.set_xlabel("change in mean reward, B - A (95% CI)")
    return _save(fig, path)
