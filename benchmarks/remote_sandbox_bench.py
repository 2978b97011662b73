"""The remote sandbox hop: a sandbox pool in this process side by side with the same pool in a Ray
actor (temper.sandbox.remote_pool, as `orchestrator.ray.remote_sandboxes` runs it), same commands.

    .venv/bin/python benchmarks/remote_sandbox_bench.py [--n 200] [--threads 4] [--calls 50] [--episodes 200]
    .venv/bin/python benchmarks/remote_sandbox_bench.py --n 10 --calls 5 --episodes 8   # a quick check

Measures, for each pool: the latency of one exec of /bin/true and of a 4 KiB write+read (p50/p90, the
hop = remote - local), exec throughput with `threads` sandboxes busy at once (calls/s), and sandbox
episodes/s (acquire, write the answer, run a python3 verifier, release: what a sandboxed answer task
does) with `threads` episodes at once. The Ray cluster is a local one (the hop crosses processes
through Ray's RPC, as between two nodes, without the network). Prints one JSON line last and
writes benchmarks/results/remote_sandbox_bench/latest.json.
"""

import argparse
import json
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sandbox_bench import pct, timed

from temper.envs.sandboxes import episode_config, make_pool
from temper.orchestrator.backends.ray import connect, shutdown
from temper.orchestrator.ray_config import RayConfig
from temper.sandbox.remote_pool import RemotePoolSpec, RemoteSandboxPool, start_pool_actors

CHECK = "import sys; print(int(open(sys.argv[1]).read().strip() == sys.argv[2]))"


def throughput(pool: Any, threads: int, calls: int) -> float:
    """exec calls/s with `threads` sandboxes each running `calls` execs of /bin/true."""
    sbs = [pool.acquire() for _ in range(threads)]
    try:
        start = time.perf_counter()
        with ThreadPoolExecutor(threads) as ex:
            list(ex.map(lambda sb: [sb.exec(["/bin/true"]) for _ in range(calls)], sbs))
        return threads * calls / (time.perf_counter() - start)
    finally:
        for sb in sbs:
            pool.release(sb)


def episode(pool: Any, i: int) -> bool:
    sb = pool.acquire()
    try:
        sb.write_file("answer.txt", str(i))
        r = sb.exec(["python3", "-c", CHECK, "answer.txt", str(i)], timeout=30)
        return r.stdout.strip() == b"1"
    finally:
        pool.release(sb)


def episodes_per_s(pool: Any, threads: int, n: int) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        ok = list(ex.map(lambda i: episode(pool, i), range(n)))
    assert all(ok), "a verifier failed"
    return n / (time.perf_counter() - start)


def latencies(pools: dict[str, Any], n: int) -> dict[str, dict[str, float]]:
    sbs = {k: p.acquire() for k, p in pools.items()}
    try:
        calls: dict[str, list[Callable[[], object]]] = {
            "exec_true": [lambda sb=sb: sb.exec(["/bin/true"]) for sb in sbs.values()],
            "write_read_4k": [lambda sb=sb: (sb.write_file("x.bin", b"x" * 4096), sb.read_file("x.bin"))
                              for sb in sbs.values()]}
        out: dict[str, dict[str, float]] = {}
        for name, fns in calls.items():
            for pool_name, xs in zip(sbs, timed(fns, n), strict=True):
                out[f"{name}_{pool_name}"] = {"p50_ms": pct(xs, 0.5), "p90_ms": pct(xs, 0.9)}
            out[f"{name}_hop"] = {"p50_ms": round(out[f"{name}_remote"]["p50_ms"] - out[f"{name}_local"]["p50_ms"], 3)}
        return out
    finally:
        for k, sb in sbs.items():
            pools[k].release(sb)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200, help="latency samples per call and pool")
    ap.add_argument("--threads", type=int, default=4, help="sandboxes busy at once (throughput, episodes)")
    ap.add_argument("--calls", type=int, default=50, help="execs per sandbox (throughput)")
    ap.add_argument("--episodes", type=int, default=200, help="sandbox episodes per pool")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/remote_sandbox_bench/latest.json")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    connect(RayConfig())  # a local cluster
    cfg = episode_config().model_copy(update={"pool_size": args.threads})
    actors = start_pool_actors(cfg, 1, pool_size=args.threads)
    pools = {"local": make_pool(cfg), "remote": RemoteSandboxPool(RemotePoolSpec(cfg, actors))}
    try:
        for p in pools.values():  # both warm before anything is timed
            p.release(p.acquire())
        time.sleep(1.0)
        result: dict[str, Any] = {"bench": "remote_sandbox", **vars(args), "out": str(args.out)}
        result["latency"] = latencies(pools, args.n)
        result["exec_calls_per_s"] = {k: round(throughput(p, args.threads, args.calls), 1) for k, p in pools.items()}
        result["episodes_per_s"] = {k: round(episodes_per_s(p, args.threads, args.episodes), 2)
                                    for k, p in pools.items()}
        for key in ("exec_calls_per_s", "episodes_per_s"):
            r = result[key]
            r["remote_over_local"] = round(r["remote"] / r["local"], 3)
    finally:
        pools["local"].close()
        import ray

        ray.get(actors[0].close.remote(), timeout=60)
        shutdown()
    for k, v in result["latency"].items():
        print(f"{k:24s} {v}")
    print(f"exec calls/s   {result['exec_calls_per_s']}")
    print(f"episodes/s     {result['episodes_per_s']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
