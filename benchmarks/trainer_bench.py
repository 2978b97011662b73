"""Trainer throughput and memory on SmolLM2-135M: packed vs padded micro-batches, gradient
checkpointing on/off, and a plain transformers training step on the same batch as the peer.

    .venv/bin/python benchmarks/trainer_bench.py [--micro-batches 1] [--seqs 8] [--threads 2]

RL-like sequences: lengths uniform in [min_len, max_len] (fixed seed), the first quarter (at most
64 tokens) is prompt, the rest carries loss. Each micro-batch holds `--seqs` sequences: packed into
one row with per-segment attention, or padded to the micro-batch's longest (the baseline). One
training step = forward + backward over the micro-batches + AdamW step (token-mean NLL on the
response tokens, the same loss in every variant). Each variant runs in its own process so that its
peak resident memory can be read; the step's memory is peak RSS minus RSS before the step.
Prints a table; the last line is JSON.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ["packed", "padded", "packed_ckpt", "padded_ckpt", "hf_padded"]


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def estimate_mb(variant: str, batch, seqs: int) -> float:
    """Rough peak of one step: weights + grads + AdamW (~2.2 GB) and ~1.5 MB of activations per token
    processed (SmolLM2-135M, 30 layers, fp32), a third of that with checkpointing, plus HF's full logits."""
    mbs = [batch[i:i + seqs] for i in range(0, len(batch), seqs)]
    if variant.startswith("packed"):
        tokens = max(sum(len(i) for i, _ in mb) for mb in mbs)
    else:
        tokens = max(len(mb) * max(len(i) for i, _ in mb) for mb in mbs)
    act = tokens * 1.5 / (3 if variant.endswith("ckpt") else 1)
    logits = tokens * 49152 * 4 * 3 / 2**20 if variant.startswith("hf") else 0.0
    return 2200 + act + logits


def make_batch(args) -> list[tuple[list[int], list[int]]]:
    import random

    rng = random.Random(args.seed)
    out = []
    for _ in range(args.micro_batches * args.seqs):
        n = rng.randint(args.min_len, args.max_len)
        ids = [rng.randrange(100, 49000) for _ in range(n)]
        prompt = min(64, n // 4)
        out.append((ids, [0] * prompt + [1] * (n - prompt)))
    return out


def worker(variant: str, args) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    batch = make_batch(args)
    mbs = [batch[i:i + args.seqs] for i in range(0, len(batch), args.seqs)]
    from temper.models import load_model

    loaded = load_model(args.model)
    tokens = sum(len(ids) for ids, _ in batch)
    if variant.startswith("hf"):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(str(loaded.path), dtype=torch.float32).train()
        del loaded
        opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

        def step(mbs) -> float:
            opt.zero_grad()
            total_loss_tokens = sum(sum(m[1:]) for mb in mbs for _, m in mb)
            loss_sum = 0.0
            for mb in mbs:
                t = max(len(ids) for ids, _ in mb)
                ids = torch.tensor([i + [0] * (t - len(i)) for i, _ in mb])
                att = torch.tensor([[1] * len(i) + [0] * (t - len(i)) for i, _ in mb])
                labels = torch.tensor([[x if m else -100 for x, m in zip(i, mk, strict=True)] + [-100] * (t - len(i))
                                       for i, mk in mb])
                logits = model(input_ids=ids, attention_mask=att).logits[:, :-1].float()
                nll = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                        labels[:, 1:].reshape(-1), ignore_index=-100,
                                                        reduction="sum") / total_loss_tokens
                nll.backward()
                loss_sum += float(nll.detach())
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss_sum
    else:
        from temper.rl import RLConfig, Trainer
        from temper.rl.batching import Sample
        from temper.rl.sft import sft_step

        cfg = RLConfig()
        cfg.optim.lr = 1e-6
        packed = variant.startswith("packed")
        cfg.trainer.packing = packed
        cfg.trainer.gradient_checkpointing = variant.endswith("ckpt")
        longest = max(len(ids) for ids, _ in batch)
        # budgets that give exactly one micro-batch of `seqs` sequences: one packed row, or seqs padded rows
        cfg.trainer.micro_batch_tokens = (max(sum(len(i) for i, _ in mb) for mb in mbs) if packed
                                          else args.seqs * longest)
        trainer = Trainer(loaded.model, cfg, pad_id=0)

        def step(mbs) -> float:
            # the trainer lays the sequences out itself: packed rows within the budget, or padded rows
            return sft_step(trainer, [Sample(torch.tensor(i), torch.tensor(m)) for mb in mbs for i, m in mb]).loss

    warm = [[(ids[:48], m[:48]) for ids, m in mbs[0][:2]]]
    step(warm)  # first-call overheads (allocator, kernels) out of the timing
    before = _rss_mb()
    start = time.perf_counter()
    loss = step(mbs)
    seconds = time.perf_counter() - start
    return {"variant": variant, "loss": loss, "seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds,
            "rss_before_mb": before, "peak_mb": _peak_mb(), "step_mem_mb": max(0.0, _peak_mb() - before)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--micro-batches", type=int, default=1)
    p.add_argument("--seqs", type=int, default=8, help="sequences per micro-batch")
    p.add_argument("--min-len", type=int, default=32)
    p.add_argument("--max-len", type=int, default=1024)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results/trainer_bench/latest.json")
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return

    results = {}
    skipped = {}
    batch = make_batch(args)
    for v in args.variants.split(","):
        need, free = estimate_mb(v, batch, args.seqs), _available_mb()
        if need > free:  # a shared machine: running out of memory would take other processes down with us
            skipped[v] = f"needs ~{need:.0f} MB, {free:.0f} MB available"
            print(f"{v:12s} skipped: {skipped[v]}", flush=True)
            continue
        cmd = [sys.executable, __file__, "--worker", v] + [
            f"--{k.replace('_', '-')}={getattr(args, k)}" for k in
            ("model", "micro_batches", "seqs", "min_len", "max_len", "seed", "threads")]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(ROOT)}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        if proc.returncode != 0:
            print(f"{v}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        results[v] = json.loads(proc.stdout.strip().splitlines()[-1])
        r = results[v]
        print(f"{v:12s} loss {r['loss']:.5f}  {r['tokens']:6d} tok  {r['seconds']:7.1f} s  "
              f"{r['tokens_per_s']:7.1f} tok/s  step memory {r['step_mem_mb']:7.0f} MB  "
              f"(peak RSS {r['peak_mb']:.0f} MB)", flush=True)

    def ratio(a: str, b: str, key: str = "tokens_per_s") -> float | None:
        if a in results and b in results and results[b][key]:
            return results[a][key] / results[b][key]
        return None

    packed_vs_padded = ratio("packed", "padded")
    vs_hf = ratio("packed", "hf_padded")
    mem_ratio = ratio("packed_ckpt", "packed", "step_mem_mb")
    losses = [r["loss"] for r in results.values()]
    same_loss = bool(losses) and max(losses) - min(losses) <= 1e-3 * max(1.0, abs(losses[0]))
    summary = {
        "model": args.model,
        "sequences": args.micro_batches * args.seqs,
        "seqs_per_micro_batch": args.seqs,
        "tokens": results[next(iter(results))]["tokens"] if results else 0,
        "threads": args.threads,
        **{f"{v}_tokens_per_s": round(r["tokens_per_s"], 2) for v, r in results.items()},
        **{f"{v}_step_mem_mb": round(r["step_mem_mb"], 1) for v, r in results.items()},
        **{f"{v}_loss": round(r["loss"], 6) for v, r in results.items()},
        "packed_vs_padded_ratio": round(packed_vs_padded, 3) if packed_vs_padded else None,
        "padded_vs_hf_ratio": round(ratio("padded", "hf_padded"), 3) if ratio("padded", "hf_padded") else None,
        "ratio_vs_hf_train_step": round(vs_hf, 3) if vs_hf else None,
        "grad_ckpt_memory_saving": round(1 - mem_ratio, 3) if mem_ratio is not None else None,
        "grad_ckpt_time_cost": round(1 / ratio("packed_ckpt", "packed"), 3) if ratio("packed_ckpt", "packed") else None,
        "same_loss": same_loss,
        "skipped": skipped,
        "target_packed_vs_padded_1_5x_met": bool(packed_vs_padded and packed_vs_padded >= 1.5),
        "target_same_loss_met": same_loss,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
