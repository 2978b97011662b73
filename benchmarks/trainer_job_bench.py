"""The default job's training step at its roofline: temper's trainer beside transformers' own step on the same
packed batch, and both against this CPU's fp32 compute floor.

    .venv/bin/python benchmarks/trainer_job_bench.py [--run RUN_DIR] [--steps 5] [--threads 2]

1. A batch of the default job: the trajectories step 2 of `temper train --max-steps 2` (the default recipe,
   no evaluation) trained on, read from its store; `--run` reads them from an existing run folder instead.
2. Each side in a process of its own, `--steps` timed steps after one warm-up, the median reported:
   - temper: `Trainer.step` on the trajectories, with the recipe's RLConfig (GRPO, the clipped token-mean
     loss with its off-policy correction, pi_old taken from the update's own forward, a group's prompt
     forwarded once);
   - transformers: `AutoModelForCausalLM` (sdpa) on the same samples packed into one row: position_ids
     restart at each sample and transformers builds the block-diagonal causal mask from them (checked: the
     packed logprobs equal each sample's own forward). Its full logits, divided by the rollouts'
     temperature, log-softmax, the same clipped token-mean surrogate with temper's advantages,
     clip_grad_norm_ and Adam with the recipe's settings.
3. The floor: a step's matmul FLOPs (3x its forward: each linear layer on every token forwarded, the LM head
   on the positions that predict a reply token, causal attention within each sample) over this CPU's best
   fp32 matmul rate (torch.mm of 2048^2 with the same threads). `job_floor_s` counts the job's least work (a
   group's prompt once); `unshared_floor_s` every sample whole, as transformers' layout has it.
Tokens/s counts the job's tokens (every sample's prompt and reply) for both sides: the same numerator.
Run it alone on the machine. Writes benchmarks/results/trainer_job_bench/latest.json; the last line of stdout
is the JSON.
"""

import argparse
import json
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).parent / "results" / "trainer_job_bench"


def log(msg: str) -> None:
    print(f"[trainer_job_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def job_batch(run: Path | None, work: Path) -> list[dict[str, Any]]:
    """The trajectories (as dicts) of the last step of `run`, or of a fresh two-step run of the default job."""
    if run is None:
        run = work / "run"
        log("temper train --max-steps 2 (the default recipe, no evaluation) for a batch of the job")
        subprocess.run([str(ROOT / ".venv/bin/temper"), "train", "--out", str(run), "--max-steps", "2",
                        "--set", "eval.before=false", "--set", "eval.after=false", "--set", "logging.progress=false"],
                       check=True, stdout=subprocess.DEVNULL)
    db = sqlite3.connect(run / "store.sqlite")
    (step,) = db.execute("SELECT MAX(consumed_step) FROM trajectories").fetchone()
    rows = db.execute("SELECT data FROM trajectories WHERE consumed_step = ? ORDER BY seq", (step,)).fetchall()
    db.close()
    return [json.loads(r[0]) for r in rows]


def recipe() -> Any:
    """The default recipe's TrainConfig (what `temper train` runs with no configuration)."""
    from temper.orchestrator.train import resolve_train_config

    return resolve_train_config(None, [], {}, None, create=False)[0]


def trained(trajs: list[dict[str, Any]], rl: Any) -> tuple[list[Any], list[float]]:
    """The trajectories temper's trainer keeps of the batch (its zero-variance filter) and their advantages,
    computed by temper's own (small) functions."""
    import torch

    from temper.rl.advantages import RunningBaseline, outcome_advantages
    from temper.rl.filtering import filter_trajectories
    from temper.trajectory import Trajectory

    f = filter_trajectories([Trajectory.from_dict(t) for t in trajs], rl.filter, True)
    adv = outcome_advantages(torch.tensor(f.rewards), f.groups, rl.advantages, RunningBaseline()).tolist()
    kept = [(t, a) for t, a, tr in zip(f.trajectories, adv, f.train, strict=True) if tr]
    return [t for t, _ in kept], [a for _, a in kept]


def forward_flops(cfg: Any, segments: list[tuple[int, list[int]]], predicting: int) -> float:
    """Forward FLOPs of a layout: each (shared prefix, [rests]) segment forwards the prefix once and each rest
    attending to the prefix and itself; `predicting` positions go through the LM head."""
    d, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    kv = cfg.num_key_value_heads * (d // cfg.num_attention_heads)
    per_token = 2 * layers * (2 * d * d + 2 * d * kv + 3 * d * inter)
    tokens, attended = 0, 0  # attended: sum over tokens of the keys each one attends to
    for prefix, rests in segments:
        tokens += prefix + sum(rests)
        attended += prefix * (prefix + 1) // 2
        attended += sum(r * prefix + r * (r + 1) // 2 for r in rests)
    return per_token * tokens + 4 * layers * d * attended + 2 * d * cfg.vocab_size * predicting


def matmul_flops_per_s(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(8):
        t = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t)
    return 2 * 2048**3 / best


# -- the two sides, each in its own process ------------------------------------------------------------------
def temper_worker(trajs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    from temper.models import load_model
    from temper.rl import Trainer
    from temper.trajectory import Trajectory

    cfg = recipe()
    loaded = load_model(cfg.model)
    trainer = Trainer(loaded.model, cfg.algorithm, pad_id=loaded.tokenizer.pad_token_id,
                      temperature=cfg.agent.temperature or 1.0)
    batch = [Trajectory.from_dict(t) for t in trajs]
    times, forwarded = [], 0.0
    for i in range(steps + 1):
        t = time.perf_counter()
        stats = trainer.step(batch)
        if i:  # the first is the warm-up
            times.append(time.perf_counter() - t)
        forwarded = stats.update.tokens
    return {"seconds": times, "tokens_forwarded": forwarded, "loss": stats.update.loss}


def hf_worker(trajs: list[dict[str, Any]], steps: int) -> dict[str, Any]:
    import torch
    from transformers import AutoModelForCausalLM

    from temper.models.registry import resolve_model

    cfg = recipe()
    rl, temperature = cfg.algorithm, cfg.agent.temperature or 1.0
    model = AutoModelForCausalLM.from_pretrained(str(resolve_model(cfg.model)), dtype=torch.float32,
                                                 attn_implementation="sdpa").train()
    opt = torch.optim.Adam(model.parameters(), lr=rl.optim.lr, betas=tuple(rl.optim.betas), eps=rl.optim.eps)
    kept = list(zip(*trained(trajs, rl), strict=True))  # the samples temper trains, with its advantages
    ids = torch.tensor([x for t, _ in kept for x in t.token_ids])[None]
    pos = torch.tensor([i for t, _ in kept for i in range(len(t.token_ids))])[None]
    # position p predicts token p + 1: the positions before each reply token, within its own sample
    sel, targets, advs, start = [], [], [], 0
    for t, a in kept:
        for i in range(1, len(t.token_ids)):
            if t.loss_mask[i]:
                sel.append(start + i - 1)
                targets.append(t.token_ids[i])
                advs.append(a)
        start += len(t.token_ids)
    sel_t, targets_t, adv_t = torch.tensor(sel), torch.tensor(targets), torch.tensor(advs)

    def logprobs() -> torch.Tensor:
        logits = model(input_ids=ids, position_ids=pos, use_cache=False).logits[0]
        return torch.log_softmax(logits[sel_t].float() / temperature, -1).gather(-1, targets_t[:, None])[:, 0]

    with torch.no_grad():  # the packed row's mask is block-diagonal: each sample alone gives the same logprobs
        packed, alone, start = logprobs(), [], 0
        for t, _ in kept:
            n = len(t.token_ids)
            logits = model(input_ids=ids[:, start:start + n], use_cache=False).logits[0]
            mine = [i - start for i in sel if start <= i < start + n]
            lp = torch.log_softmax(logits[mine].float() / temperature, -1)
            alone.append(lp.gather(-1, torch.tensor([ids[0, start + i + 1] for i in mine])[:, None])[:, 0])
            start += n
        packing_error = float((packed - torch.cat(alone)).abs().max())

    def step() -> float:
        opt.zero_grad()
        lp = logprobs()
        ratio = torch.exp(lp - lp.detach())  # one pass per batch: pi_old is this forward's
        clipped = torch.clamp(ratio, 1 - rl.loss.clip_low, 1 + rl.loss.clip_high)
        loss = -torch.minimum(ratio * adv_t, clipped * adv_t).mean()  # token mean
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), rl.optim.grad_clip)
        opt.step()
        return float(loss)

    times = []
    for i in range(steps + 1):
        t = time.perf_counter()
        loss = step()
        if i:
            times.append(time.perf_counter() - t)
    return {"seconds": times, "tokens_forwarded": int(ids.shape[1]), "loss": loss, "packing_error": packing_error}


def run_side(side: str, batch_file: Path, steps: int, threads: int) -> dict[str, Any]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, __file__, "--worker", side, "--batch", str(batch_file), "--steps", str(steps),
           "--threads", str(threads)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit(f"trainer_job_bench: the {side} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", type=Path, default=None, help="a `temper train` run folder to take the batch from")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=OUT / "latest.json")
    args = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(0, str(ROOT))
    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        torch.manual_seed(0)
        trajs = json.loads(args.batch.read_text())
        out = (temper_worker if args.worker == "temper" else hf_worker)(trajs, args.steps)
        print(json.dumps({**out, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
        return

    from temper.models.checkpoint import read_config
    from temper.models.registry import resolve_model

    with tempfile.TemporaryDirectory(prefix="trainer_job_bench-") as tmp:
        work = Path(tmp)
        trajs = job_batch(args.run, work)
        batch_file = work / "batch.json"
        batch_file.write_text(json.dumps(trajs))
        sides = {}
        for side in ("temper", "transformers"):
            log(f"{side}: {args.steps} timed steps")
            sides[side] = run_side(side, batch_file, args.steps, args.threads)

    cfg = recipe()
    model_cfg = read_config(resolve_model(cfg.model))  # the shape only: no weights loaded
    kept, _ = trained(trajs, cfg.algorithm)
    job_tokens = sum(len(t.token_ids) for t in kept)
    predicting = sum(sum(t.loss_mask[1:]) for t in kept)
    groups: dict[str, list[Any]] = {}
    for t in kept:
        groups.setdefault(t.group_id, []).append(t)
    shared = []
    for members in groups.values():
        prompt = members[0].loss_mask.index(1)  # the group's samples share their prompt's tokens
        shared.append((prompt, [len(t.token_ids) - prompt for t in members]))
    peak = matmul_flops_per_s(args.threads)
    job_floor = 3 * forward_flops(model_cfg, shared, predicting) / peak
    unshared_floor = 3 * forward_flops(model_cfg, [(0, [len(t.token_ids)]) for t in kept], predicting) / peak
    result: dict[str, Any] = {"samples": len(kept), "job_tokens": job_tokens, "threads": args.threads,
                              "matmul_gflops": round(peak / 1e9, 1), "job_floor_s": round(job_floor, 3),
                              "unshared_floor_s": round(unshared_floor, 3)}
    for side, r in sides.items():
        s = statistics.median(r["seconds"])
        result[side] = {"step_s": round(s, 3), "step_s_all": [round(x, 3) for x in r["seconds"]],
                        "tokens_per_s": round(job_tokens / s, 1), "tokens_forwarded": r["tokens_forwarded"],
                        "fraction_of_job_floor": round(job_floor / s, 3), "peak_rss_mb": round(r["peak_rss_mb"]),
                        "loss": r["loss"]}
    result["transformers"]["packing_error"] = sides["transformers"]["packing_error"]
    result["ratio_vs_transformers"] = round(result["transformers"]["step_s"] / result["temper"]["step_s"], 3)
    result["target_1_5x_met"] = result["ratio_vs_transformers"] >= 1.5
    result["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                      text=True).stdout.strip()
    result["date"] = time.strftime("%Y-%m-%d")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
