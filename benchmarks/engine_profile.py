"""Where a decode step's time goes: per phase and per op, at batch 1 and batch 64.

    .venv/bin/python benchmarks/engine_profile.py                 # SmolLM2, 2 threads
    .venv/bin/python benchmarks/engine_profile.py --batches 1,64 --steps 16

The engine runs the rollout workload's shape (~300-token chat prompts sharing a system prompt,
temperature 1); once every row decodes, `--steps` steps are timed by phase (schedule, the model's
forward, the head's logits, sampling and the bookkeeping after it) and profiled by op with
torch.profiler (ops grouped into linear layers, attention, norms/RoPE/activations, copies and
indexing, the head, sampling). Prints a table per batch size; the last line is one JSON object.
"""

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_bench import cpu_model, rollout_prompts

from temper.engine import EngineConfig, LLMEngine
from temper.generation import SamplingParams
from temper.malloc import use_fast_allocator
from temper.models import load_model

# aten op -> category (first match on a prefix); anything else is "other"
CATEGORIES = [
    ("linear", ("aten::addmm", "aten::mm", "aten::linear", "mkl::_mkl_linear", "mkldnn::_linear_pointwise",
                "temper::small_gemm")),
    ("attention", ("aten::matmul", "aten::bmm", "aten::_softmax", "aten::softmax", "aten::scaled_dot_product",
                   "aten::_scaled_dot_product", "aten::amax", "aten::exp", "aten::baddbmm",
                   "temper::decode_attention")),
    ("copies/indexing", ("aten::copy_", "aten::index", "aten::index_put", "aten::cat", "aten::clone",
                         "aten::contiguous", "aten::_index_put", "aten::index_select", "aten::gather",
                         "aten::masked_fill", "aten::zeros", "aten::empty", "aten::fill_", "aten::to",
                         "aten::_to_copy", "aten::tensor", "aten::arange", "aten::lift_fresh")),
    ("norm/rope/act", ("aten::mul", "aten::add", "aten::rsqrt", "aten::pow", "aten::mean", "aten::silu",
                       "aten::neg", "aten::sub", "aten::div", "aten::sum")),
    ("sampling", ("aten::logsumexp", "aten::searchsorted", "aten::cumsum", "aten::argmax", "aten::topk",
                  "aten::sort", "aten::rand", "aten::uniform_")),
]


def category(name: str) -> str:
    for cat, prefixes in CATEGORIES:
        if name.startswith(prefixes):
            return cat
    return "other"


def decoding_engine(lm, batch: int, prompts: list[list[int]], steps: int, kernels: str = "auto",
                    packed: str = "auto") -> LLMEngine:
    engine = LLMEngine(lm.model, lm.tokenizer, EngineConfig(kv_budget_bytes=2 * 1024**3, native_kernels=kernels,
                                                            packed_weights=packed))
    for i in range(batch):
        engine.add_request(prompts[i % len(prompts)], SamplingParams(temperature=1.0, seed=i, ignore_eos=True,
                                                                     max_tokens=3 * steps + 16))
    while not (engine.scheduler.running and not engine.scheduler.waiting
               and all(s.num_pending == 1 for s in engine.scheduler.running)):
        engine.step()
    for _ in range(4):  # warm the decode buffer and allocator
        engine.step()
    return engine


def phases(engine: LLMEngine, steps: int) -> dict[str, float]:
    """Median ms per step of each phase, timed by wrapping the runner's forward and logits."""
    runner, timings = engine.runner, defaultdict(list)
    model_call, logits_call, sampler_call = runner.model.__call__, runner._logits, engine.sampler.__call__

    def timed(name, fn):
        def wrapper(*a, **kw):
            t = time.perf_counter()
            out = fn(*a, **kw)
            timings[name].append(time.perf_counter() - t)
            return out
        return wrapper

    runner.model.forward_timed = timed("forward", model_call)
    runner.model = _Proxy(runner.model, runner.model.forward_timed)
    runner._logits = timed("logits", logits_call)
    engine.sampler = _Proxy(engine.sampler, timed("sampling", sampler_call))
    try:
        for _ in range(steps):
            t = time.perf_counter()
            engine.step()
            timings["step"].append(time.perf_counter() - t)
    finally:
        runner.model = runner.model.inner
        del runner._logits
        engine.sampler = engine.sampler.inner
    out = {k: statistics.median(v) * 1e3 for k, v in timings.items()}
    out["bookkeeping"] = out["step"] - out["forward"] - out["logits"] - out["sampling"]
    return {k: round(v, 2) for k, v in out.items()}


class _Proxy:
    """Calls go to `call`; attributes to the wrapped object (the runner reads model.config)."""

    def __init__(self, inner, call):
        self.inner, self._call = inner, call

    def __call__(self, *a, **kw):
        return self._call(*a, **kw)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def ops(engine: LLMEngine, steps: int) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """ms per step by category (self CPU time of aten ops) and the top ops."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            engine.step()
    by_cat: dict[str, float] = defaultdict(float)
    top = []
    for ev in prof.key_averages():
        if not ev.key.startswith(("aten::", "mkl::", "mkldnn::", "temper::")):
            continue
        ms = ev.self_cpu_time_total / 1e3 / steps
        by_cat[category(ev.key)] += ms
        top.append((ev.key, round(ms, 3), ev.count // steps))
    top.sort(key=lambda x: -x[1])
    return {k: round(v, 2) for k, v in sorted(by_cat.items(), key=lambda kv: -kv[1])}, top[:15]


def main() -> None:
    use_fast_allocator()  # re-executes this script on tcmalloc (as vLLM's peer runs) where it is installed
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batches", default="1,64")
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--prompt-tokens", type=int, default=300)
    p.add_argument("--native-kernels", default="auto", help="auto, on or off (EngineConfig.native_kernels)")
    p.add_argument("--packed-weights", default="auto", help="auto, onednn, mkl or off (EngineConfig.packed_weights)")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results/engine_profile/latest.json")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    prompts = rollout_prompts(lm.tokenizer, 8, args.prompt_tokens)
    result: dict = {"model": args.model, "threads": args.threads, "cpu": cpu_model(),
                    "native_kernels": args.native_kernels, "packed_weights": args.packed_weights}
    for b in map(int, args.batches.split(",")):
        engine = decoding_engine(lm, b, prompts, args.steps, args.native_kernels, args.packed_weights)
        ph = phases(engine, args.steps)
        cats, top = ops(engine, args.steps)
        print(f"\nbatch {b}: {ph['step']:.1f} ms per decode step")
        print("  phases (ms): " + ", ".join(f"{k} {v}" for k, v in ph.items() if k != "step"))
        print("  ops by category (self CPU ms per step): " + ", ".join(f"{k} {v}" for k, v in cats.items()))
        for name, ms, count in top[:10]:
            print(f"    {name:40s} {ms:8.2f} ms  x{count}")
        result[f"b{b}"] = {"phases_ms": ph, "ops_ms": cats, "top_ops": top}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
