"""The dashboard's trajectory pages on a large store: each page's response time over HTTP, from a real
`temper dashboard` process, on a store of 100,000 synthetic episodes written by temper's own Store.

    .venv/bin/python benchmarks/dashboard_bench.py [--episodes 100000] [--tokens 256] [--repeats 5] [--keep DIR]

Target (2-core machine, run alone): every page under 200 ms. The store is built once into --keep (or a
temporary folder); rows carry `--tokens`-token trajectories with tool calls, 40 domains, 5% failures.
Prints a table, then one JSON line (the last line); writes benchmarks/results/dashboard_bench/latest.json.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import yaml
from rich.console import Console
from rich.progress import track
from rich.table import Table

from temper.orchestrator.store import Store
from temper.trajectory import FailureKind, Trajectory

TARGET_MS = 200.0
GROUP = 8
FAILURES = list(FailureKind)


def build(run: Path, episodes: int, tokens: int, seed: int = 0) -> None:
    """A run folder whose store holds `episodes` finished episodes over `episodes / 64` trainer steps."""
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"model": "smollm2-135m", "max_steps": episodes // 64}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s + 1, "reward": 0.5}) + "\n"
                                               for s in range(episodes // 64)))
    rng = random.Random(seed)
    store = Store(run / "store.sqlite")
    prompt = tokens // 2
    for g in track(range(episodes // GROUP), description=f"writing {episodes:,} episodes", transient=True):
        task, domain = f"task-{rng.randrange(5000):05d}", f"domain-{rng.randrange(40):02d}"
        gid = f"{task}-{g:07d}"
        store.start_group(gid, task, domain, GROUP)
        trajs = []
        for _ in range(GROUP):
            failure = rng.choice(FAILURES) if rng.random() < 0.05 else None
            reward = 0.0 if failure else float(rng.random() < 0.4)
            trajs.append(Trajectory(
                token_ids=[rng.randrange(49152) for _ in range(tokens)],
                loss_mask=[0] * prompt + [1] * (tokens - prompt),
                logprobs=[0.0] * prompt + [round(-rng.random(), 4) for _ in range(tokens - prompt)],
                versions=[-1] * prompt + [g // 8] * (tokens - prompt), reward=reward, task_id=task, group_id=gid,
                failure=failure, info={"suite": "bench", "domain": domain, "tool_calls": 1, "actions": [
                    {"turn": 0, "name": "bash", "arguments": {"command": "ls /app"}, "output": "main.py\n",
                     "error": False, "duration_s": 0.01}]}))
        store.finish_group(gid, trajs, "complete", [1] * GROUP)
        if g % 8 == 7:  # a batch of 8 groups is one trainer step
            store.commit_steps([(g // 8 + 1, [f"{task}-{x:07d}" for x in range(g - 7, g + 1)], [], {})], None)
    store.close()


def pages(run: Path) -> dict[str, str]:
    """The URLs to time: the first page, each filter, a deep page, a filter combination, one episode."""
    import sqlite3

    with sqlite3.connect(f"file:{run / 'store.sqlite'}?mode=ro", uri=True) as db:
        n = db.execute("SELECT MAX(seq) FROM trajectories").fetchone()[0]
        ep, task, domain = db.execute("SELECT id, task_id, domain FROM trajectories WHERE seq = ?",
                                      (n // 2,)).fetchone()
        step = db.execute("SELECT MAX(consumed_step) FROM trajectories").fetchone()[0] // 2
    f = "/episodes?f=0/run"
    return {"first page": f, "status=failed": f"{f}&status=failed", f"domain={domain}": f"{f}&domain={domain}",
            "failure=engine_error": f"{f}&failure=engine_error", f"step={step}": f"{f}&step={step}",
            "reward>=1": f"{f}&min_reward=1", f"task={task}": f"{f}&task={task}",
            "deep page (middle)": f"{f}&before={n // 2}", "domain + reward>=1": f"{f}&domain={domain}&min_reward=1",
            "one episode": f"/episode?f=0/run&id={quote(ep)}", "run page": "/run?f=0/run"}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the store here once and reuse it")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/dashboard_bench/latest.json")
    args = ap.parse_args()
    console = Console(stderr=True)
    root = args.keep or Path(tempfile.mkdtemp(prefix="dashboard-bench-"))
    run = root / "run"
    t = time.perf_counter()
    if not (run / "store.sqlite").exists():
        build(run, args.episodes, args.tokens)
    build_s = time.perf_counter() - t
    size_mb = (run / "store.sqlite").stat().st_size / 2**20
    proc = subprocess.Popen([sys.executable, "-m", "temper", "dashboard", str(root), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = (proc.stdout.readline() if proc.stdout else "").split(" on ", 1)[1].split()[0].rstrip("/")
        with httpx.Client(timeout=60) as client:
            for _ in range(50):  # the server is up once it answers
                try:
                    client.get(url + "/")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            results = {}
            for name, path in pages(run).items():
                times = []
                for _ in range(args.repeats + 1):  # the first is a warm-up (page cache, tokenizer load)
                    t0 = time.perf_counter()
                    r = client.get(url + path)
                    times.append((time.perf_counter() - t0) * 1e3)
                    assert r.status_code == 200, (path, r.status_code, r.text[:300])
                results[name] = {"median_ms": round(statistics.median(times[1:]), 1),
                                 "max_ms": round(max(times[1:]), 1), "first_ms": round(times[0], 1)}
    finally:
        proc.terminate()
        proc.wait(10)
    table = Table(title=f"dashboard pages on {args.episodes:,} episodes ({size_mb:,.0f} MB store)")
    for col in ("page", "median ms", "max ms", "first (cold) ms"):
        table.add_column(col, justify="right" if col != "page" else "left")
    for name, r in results.items():
        table.add_row(name, f"{r['median_ms']:.1f}", f"{r['max_ms']:.1f}", f"{r['first_ms']:.1f}")
    console.print(table)
    worst = max(r["max_ms"] for r in results.values())
    out = {"episodes": args.episodes, "tokens_per_episode": args.tokens, "store_mb": round(size_mb),
           "repeats": args.repeats, "build_s": round(build_s, 1), "pages": results, "worst_page_ms": worst,
           "target_ms": TARGET_MS,
           "meets_target": worst < TARGET_MS}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
