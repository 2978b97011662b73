"""Environment QA throughput on the shipped terminal suite: tasks checked per minute (oracle x3 +
negative controls: no-op, echo, tamper run; no policy), and the share of time in sandbox start-up
(acquiring a warm sandbox, incl. its template switch, and releasing it) vs task work (setup, solve.sh,
verifier, probes). For scale, a cold sandbox start is measured too.

    .venv/bin/python benchmarks/envqa_bench.py [--concurrency 2] [--oracle-runs 3] [--limit N]

Progress goes to stderr; the last line of stdout is JSON, also written to
benchmarks/results/envqa_bench/latest.json.
"""

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def cold_start_s(n: int = 3) -> float:
    from temper.envs.sandboxes import episode_config
    from temper.sandbox import Sandbox

    with tempfile.TemporaryDirectory() as d:
        cfg = episode_config().model_copy(update={"run_dir": Path(d)})
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            sb = Sandbox(cfg)
            sb.exec("true")
            times.append(time.perf_counter() - t0)
            sb.close()
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--oracle-runs", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/envqa_bench/latest.json")
    args = ap.parse_args()
    from temper.envqa import EnvQAConfig, run_envqa

    with tempfile.TemporaryDirectory() as d:
        cfg = EnvQAConfig.from_recipe(dict(suite="terminal", policy=False, oracle_runs=args.oracle_runs,
            concurrency=args.concurrency,
                          limit=args.limit, out=str(Path(d) / "qa")))
        report = asyncio.run(run_envqa(cfg))
    s = report["summary"]
    episodes = s["executed"] * (args.oracle_runs + 3)
    result = {
        "bench": "envqa", "suite": "terminal", "tasks": s["tasks"], "oracle_runs": args.oracle_runs,
        "concurrency": args.concurrency, "episodes": episodes, "wall_s": s["wall_s"],
        "tasks_per_minute": s["tasks_per_minute"], "startup_s": s["startup_s"], "work_s": s["work_s"],
        "startup_share": s["startup_share"], "work_share": round(1 - s["startup_share"], 4),
        "startup_ms_per_episode": round(1000 * s["startup_s"] / episodes, 1), "pool": s["pool"],
        "cold_start_ms": round(1000 * cold_start_s(), 1), "ok": s["counts"]["ok"],
        "loadavg_1m": round(os.getloadavg()[0], 1),
    }
    print(f"{s['tasks']} tasks, {episodes} episodes in {s['wall_s']:.1f} s: {s['tasks_per_minute']} tasks/min; "
          f"start-up {100 * s['startup_share']:.1f}% of sandbox time")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
