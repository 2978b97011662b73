"""The web suite's verification cost: seconds per verification (the site copied out and back around a reset to
the image, tests/ uploaded, test.sh: Chromium launched, pages rendered, checks run) per task category, p50 and
p99, and oracle episodes per minute (sandbox acquired, solve.sh, verification, released) at a concurrency of 2.
No peer: nothing else ships these tasks.
Target: p50 <= 2 s per verification. Run it alone (2 cores).

    .venv/bin/python benchmarks/web_bench.py [--repeats 3] [--concurrency 2]

Progress goes to stderr; the last line of stdout is JSON, also written to benchmarks/results/web_bench/latest.json
with a PNG of the per-category times beside it.
"""

import argparse
import asyncio
import json
import os
import statistics
import time
from collections import defaultdict
from pathlib import Path

TARGET_P50_S = 2.0


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))], 3)


async def verify_times(suite, task, n: int, solve: bool = True) -> tuple[str, list[float], float]:
    """(category, seconds of each of `n` verifications, seconds of the whole episode: the sandbox acquired,
    solve.sh, the verifications, released)."""
    start = time.perf_counter()
    times = []
    async with suite.make_env(task) as env:
        await env.reset()
        await env.run_solution()
        for _ in range(n):
            t = time.perf_counter()
            reward = await env.verify()
            times.append(time.perf_counter() - t)
            if reward.value != 1.0:
                raise SystemExit(f"web_bench: {task.payload['name']}: the oracle scored {reward.value} "
                                 f"({reward.components}); {reward.info.get('test_output', '')[-300:]}")
    return env.folder.category or "none", times, time.perf_counter() - start


async def gather_limited(make, items, concurrency: int, progress, label: str) -> tuple[list, float]:
    """make(item) for every item, `concurrency` at a time; (results, wall seconds)."""
    job = progress.add_task(label, total=len(items))
    gate = asyncio.Semaphore(concurrency)

    async def one(item):
        async with gate:
            out = await make(item)
        progress.advance(job)
        return out

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in items))
    return results, time.perf_counter() - t0


async def measure(repeats: int, concurrency: int, progress) -> dict:
    from temper.envs import parse_spec

    suite = parse_spec("web")
    tasks = suite.tasks()  # images built (once) before anything is timed
    # 1. oracle episodes, as a run would have them: episodes per minute
    episodes, episodes_wall = await gather_limited(lambda t: verify_times(suite, t, 1), tasks, concurrency,
                                                   progress, "oracle episodes")
    # 2. more verifications of each solved task, for the per-category distribution
    more, _ = await gather_limited(lambda t: verify_times(suite, t, repeats), tasks, concurrency, progress,
                                   "verifications")
    by_cat: dict[str, list[float]] = defaultdict(list)
    for cat, times, _ in [*episodes, *more]:
        by_cat[cat] += times
    every = [x for xs in by_cat.values() for x in xs]
    return {
        "bench": "web", "tasks": len(tasks), "verifications": len(every), "concurrency": concurrency,
        "cores": os.cpu_count(), "verify_p50_s": pct(every, 0.5), "verify_p99_s": pct(every, 0.99),
        "target_p50_s": TARGET_P50_S, "target_met": pct(every, 0.5) <= TARGET_P50_S,
        "per_category": {c: {"n": len(xs), "p50_s": pct(xs, 0.5), "p99_s": pct(xs, 0.99),
                             "mean_s": round(statistics.fmean(xs), 3)} for c, xs in sorted(by_cat.items())},
        "episode_p50_s": pct([e for _, _, e in episodes], 0.5),
        "episodes_per_minute": round(60 * len(tasks) / episodes_wall, 2), "episodes_wall_s": round(episodes_wall, 1),
    }


def plot(result: dict, path: Path) -> None:
    from temper.runtime import pyplot

    plt = pyplot()
    cats = list(result["per_category"])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(cats, [result["per_category"][c]["p50_s"] for c in cats], label="p50")
    ax.scatter(cats, [result["per_category"][c]["p99_s"] for c in cats], color="k", marker="_", s=400, label="p99")
    ax.axhline(TARGET_P50_S, color="r", linestyle="--", label=f"target p50 {TARGET_P50_S:g} s")
    ax.set_ylabel("seconds per verification")
    ax.set_title(f"web suite: {result['episodes_per_minute']} oracle episodes/min at concurrency "
                 f"{result['concurrency']}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/web_bench/latest.json")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from rich.progress import Progress

    with Progress(transient=True) as progress:
        result = asyncio.run(measure(args.repeats, args.concurrency, progress))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
