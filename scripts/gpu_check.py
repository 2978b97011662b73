"""The GPU paths end to end, in a few minutes, on a CUDA machine (scripts/gpu_check.sh runs it).

1. Engine greedy parity: SmolLM2 on the GPU against the same model on the CPU, the same chat prompts,
   greedy; reports the share of tokens identical (up to the first difference, per prompt) and how many
   prompts agree to the end. fp32 on both sides: GPU kernels differ in the last bits, so a long
   continuation may fork where two tokens are near-tied; parity here means agreeing for most of it.
2. A training step on the GPU: the trainer (bf16 autocast, fp32 master weights) on trajectories the GPU
   engine sampled, checking the weights moved and the loss is finite.
3. The rollout benchmark's section 1 at its --quick size on the GPU (benchmarks/engine_bench.py).

Last stdout line: one JSON object. On a machine without CUDA it says so in one line and exits 2.
`--device cpu` runs the same code with the CPU on both sides (the test suite does, at a tiny size).
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ["What is the capital of France?", "Write a haiku about the sea.", "What is 17 + 25?",
             "Name three primary colours.", "Explain what a CPU does in one sentence.", "Count from 1 to 10."]


def chat_prompts(tokenizer) -> list[list[int]]:
    return [tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True,
                                          tokenize=True) for q in QUESTIONS]


def greedy(lm, prompts: list[list[int]], max_new: int) -> list:
    from temper.engine import EngineConfig, LLMEngine
    from temper.generation import SamplingParams

    engine = LLMEngine(lm.model, lm.tokenizer, EngineConfig(kv_budget_bytes=512 * 1024**2))
    return engine.generate(prompts, SamplingParams(temperature=0.0, max_tokens=max_new))


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parity(device: torch.device, max_new: int) -> tuple[dict, object, list]:
    from temper.models import load_model

    cpu, acc = load_model("smollm2-135m", device="cpu"), load_model("smollm2-135m", device=device)
    assert next(acc.model.parameters()).device.type == device.type
    prompts = chat_prompts(cpu.tokenizer)
    t = time.perf_counter()
    on_acc = greedy(acc, prompts, max_new)
    sync(device)
    acc_s = time.perf_counter() - t
    on_cpu = greedy(cpu, prompts, max_new)
    same = total = whole = 0
    for a, b in zip((c.token_ids for c in on_cpu), (c.token_ids for c in on_acc), strict=True):
        k = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        same, total, whole = same + k, total + max(len(a), len(b)), whole + (list(a) == list(b))
    return {"parity_identical_token_share": round(same / max(1, total), 4), "parity_prompts_identical": whole,
            "parity_prompts": len(prompts), "device_greedy_s": round(acc_s, 2)}, acc, on_acc


def train_step(device: torch.device, lm, completions: list) -> dict:
    """One trainer step (bf16 autocast over fp32 weights) on the engine's own samples and logprobs."""
    from temper.rl import Trainer
    from temper.rl.config import OptimConfig, RLConfig, TrainerConfig
    from temper.trajectory import Trajectory

    trajs = []
    for i, c in enumerate(completions):
        p, ids = list(c.prompt_token_ids), list(c.prompt_token_ids) + list(c.token_ids)
        trajs.append(Trajectory(ids, [0] * len(p) + [1] * len(c.token_ids), [0.0] * len(p) + list(c.logprobs),
                                [-1] * len(p) + [0] * len(c.token_ids), reward=float(i % 2), group_id="g0",
                                id=f"t{i}"))
    cfg = RLConfig(trainer=TrainerConfig(dtype="bfloat16"), optim=OptimConfig(lr=1e-5, warmup_steps=0))
    trainer = Trainer(lm.model, cfg, pad_id=lm.tokenizer.pad_token_id)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    sync(device)
    t = time.perf_counter()
    stats = trainer.step(trajs)
    sync(device)
    moved = sum(not torch.equal(before[k], v.detach()) for k, v in trainer.model.named_parameters())
    update = stats.update
    out = {"train_step_s": round(time.perf_counter() - t, 2), "train_loss": update.loss if update else None,
           "train_logprob_mismatch": update.mean_abs_logprob_mismatch if update else None,
           "train_params_changed": moved, "train_params": len(before),
           "train_param_dtypes": sorted({str(v.dtype) for v in trainer.model.parameters()})}
    if device.type == "cuda":
        out["train_peak_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    return out


def rollout_section(device: torch.device) -> dict:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "engine_bench.py"), "--sections", "1", "--quick", "--skip-hf",
           "--skip-vllm", "--device", str(device), "--out-dir", str(ROOT / "benchmarks" / "results" / "gpu_check")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        return {"rollout_error": (r.stderr.strip().splitlines() or ["(no output)"])[-1]}
    last = json.loads(r.stdout.strip().splitlines()[-1])
    return {f"rollout_{k}": v for k, v in last.items() if "tok_s" in k or k == "wall_s"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="the accelerator side (cpu: a dry run of the same code)")
    p.add_argument("--max-new", type=int, default=64, help="greedy tokens per prompt in the parity check")
    p.add_argument("--skip-rollout", action="store_true", help="leave out the rollout benchmark")
    args = p.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device on this machine (torch.cuda.is_available() is False)", file=sys.stderr)
        print(json.dumps({"cuda": False}))
        return 2
    t0 = time.perf_counter()
    out: dict = {"device": str(device), "torch": torch.__version__}
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
    figures, lm, completions = parity(device, args.max_new)
    out.update(figures)
    out.update(train_step(device, lm, completions))
    if not args.skip_rollout:
        out.update(rollout_section(device))
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
