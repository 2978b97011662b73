"""The main job side by side: temper's default recipe and Hugging Face TRL's GRPOTrainer, matched, one run each.

    .venv/bin/python benchmarks/main_job_bench.py [--steps 16] [--staleness 1,0] [--seeds 0,1,2] [--eval-n 200]
        [--set KEY=VALUE ...]   (temper's side: the recipe with these `temper train --set` settings)

1. `temper train` with its default recipe (SmolLM2-135M-Instruct, two-digit addition, GRPO), once per
   `orchestrator.max_staleness` asked for, held-out evaluation off (it is done below, the same way for all).
2. TRL's GRPOTrainer (trl 1.16, in its own venv `.venv-trl` with torch==2.13.0 pinned in the same pip
   command; made on first use) on the same model folder, given the tasks temper's first run trained on, in
   the order it trained them, as the same chat messages (system prompt + question). Matched: group size,
   prompts per step, steps, learning rate and its (constant) schedule, Adam's betas and eps, weight decay,
   gradient clipping, temperature, top-p, max new tokens, KL coefficient (0), clipping range (0.2 / 0.28),
   token-mean loss, one optimisation pass per batch, no gradient checkpointing, fp32, the machine's threads.
3. Checks, before any figure is reported: TRL's prompt token ids (from its own tokenisation path) equal
   the ids temper trained on, task by task; every completion TRL scored gets the same reward from temper's
   verifier; the held-out task ids are the same for every side.
4. `temper eval` (greedy, the recipe's agent settings) on the held-out set: the base model, each temper
   run's last checkpoint, TRL's trained model; gain = after - before, paired bootstrap over the tasks.

Training wall-clock is first step to last, without model load or evaluation: temper's is the sum of its
steps' `step_s` (from the rollouts' start), TRL's from `on_train_begin` to its last `on_step_end`. Run it
alone on the machine. Writes benchmarks/results/main_job_bench/latest.json and a PNG beside it; the last
line of stdout is the JSON. The comparison logic is tested in tests/rl/test_main_job_bench.py.
"""

import argparse
import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TRL_VENV = ROOT / ".venv-trl"
TRL_PINS = ("torch==2.13.0", "trl==1.16.0")
TRL_SIDE = Path(__file__).with_name("trl_grpo_side.py")
OUT = Path(__file__).parent / "results" / "main_job_bench"
# What TRL cannot be given of temper's recipe (said in the JSON, with each side's value)
UNMATCHED = {
    "zero_variance_filter": "temper drops groups whose rewards are all equal and starts others in their place "
                            "(orchestrator.max_refills); TRL trains on every group (such a group's advantages are 0)",
    "task_order": "TRL gets the tasks temper's first run trained on, in that order: the groups temper kept after "
                  "its filter, a selection TRL's own sampling would not have made",
    "asynchrony": "temper's rollouts overlap training (max_staleness); TRL generates, then trains",
    "off_policy_correction": "temper: token-level truncated importance sampling (cap 2) against the engine's "
                             "logprobs and a dual clip (3); TRL (no vLLM): neither",
    "engine": "temper samples with its own engine (paged KV, prefix cache); TRL with transformers' generate",
}


def commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout.strip()


def log(msg: str) -> None:
    print(f"[main_job_bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the comparison logic (tests/rl/test_main_job_bench.py) --------------------------------------------------
def prompt_mismatches(temper_ids: list[list[int]], trl_ids: list[list[int]]) -> list[int]:
    """Indexes of the prompts whose token ids differ (a missing one counts)."""
    n = max(len(temper_ids), len(trl_ids))
    return [i for i in range(n) if i >= len(temper_ids) or i >= len(trl_ids) or temper_ids[i] != trl_ids[i]]


def reward_mismatches(completions: list[dict[str, Any]], score: Any) -> list[dict[str, Any]]:
    """The completions whose reward (as TRL's side scored it) differs from `score(text, answer)`'s."""
    bad = []
    for c in completions:
        mine = score(c["text"], c["answer"])
        if mine != c["reward"]:
            bad.append({**c, "temper": mine})
    return bad


def heldout_ids(sides: dict[str, dict[str, float | None]]) -> list[str]:
    """The held-out task ids every side scored; an error naming the sides if they differ."""
    ids = {name: sorted(scores) for name, scores in sides.items()}
    first = next(iter(ids.values()))
    differ = [name for name, got in ids.items() if got != first]
    if differ:
        raise SystemExit(f"main_job_bench: held-out task ids differ between {next(iter(ids))} and {differ}")
    return first


def first_distinct(task_ids: list[str], n: int) -> int:
    """How many of the suite's tasks to take for its first `n` distinct ids (what `temper train` evaluates;
    `temper eval --limit` counts tasks, and a generated suite repeats a few)."""
    seen: set[str] = set()
    for i, tid in enumerate(task_ids):
        seen.add(tid)
        if len(seen) == n:
            return i + 1
    return len(task_ids)


def temper_score(suite: Any, tasks: dict[str, Any]) -> Any:
    """score(text, answer) by temper's own verifier of the suite (an AnswerEnv: no sandbox is started)."""
    by_answer = {str(t.payload["answer"]): t for t in tasks.values()}

    def score(text: str, answer: str) -> float:
        env = suite.make_env(by_answer[answer])
        return asyncio.run(env.verify(text)).value

    return score


def gain(before: dict[str, float | None], after: dict[str, float | None]) -> dict[str, Any]:
    from temper.evals.compare import difference

    a = {k: v for k, v in before.items() if v is not None}
    b = {k: v for k, v in after.items() if v is not None}
    return difference(a, b)


# -- the two sides -------------------------------------------------------------------------------------------
def run(cmd: list[str], **kw: Any) -> None:
    log(" ".join(cmd[:6]) + (" ..." if len(cmd) > 6 else ""))
    subprocess.run(cmd, check=True, **kw)


def ensure_trl() -> Path:
    py = TRL_VENV / "bin" / "python"
    stamp = TRL_VENV / ".temper-setup"
    if stamp.exists() and stamp.read_text() == " ".join(TRL_PINS):
        return py
    if not py.exists():
        run(["python3", "-m", "venv", str(TRL_VENV)])
    run([str(py), "-m", "pip", "install", "-qq", *TRL_PINS])  # torch pinned in the same command as trl
    stamp.write_text(" ".join(TRL_PINS))
    return py


def temper_train(out: Path, staleness: int, steps: int, seed: int, sets: Sequence[str] = ()) -> dict[str, Any]:
    run([str(ROOT / ".venv/bin/temper"), "train", "--out", str(out), "--max-steps", str(steps),
         *[x for s in sets for x in ("--set", s)],
         "--set", f"orchestrator.max_staleness={staleness}", "--set", f"runtime.seed={seed}",
         "--set", "eval.before=false", "--set", "eval.after=false", "--set", "logging.progress=false"],
        stdout=subprocess.DEVNULL)
    return temper_run_record(out, staleness)


def temper_run_record(out: Path, staleness: int) -> dict[str, Any]:
    """A finished `temper train` run's figures: step times by phase, samples generated and trained, the tasks
    and prompt ids it trained on in order, its last checkpoint."""
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    db = sqlite3.connect(out / "store.sqlite")
    generated = db.execute("SELECT COUNT(*) FROM trajectories WHERE status != 'in_flight'").fetchone()[0]
    trained = db.execute("SELECT group_id, task_id, data FROM trajectories WHERE consumed_step IS NOT NULL "
                         "ORDER BY consumed_step, seq").fetchall()
    db.close()
    groups: dict[str, tuple[str, list[int]]] = {}
    for gid, tid, data in trained:
        if gid not in groups:
            t = json.loads(data)
            groups[gid] = (tid, t["token_ids"][:t["loss_mask"].index(1)])
    ckpt = sorted((out / "checkpoints").glob("step_*"))[-1] / "model"
    return {"staleness": staleness, "train_s": sum(r["step_s"] for r in rows), "steps": len(rows),
            "samples_generated": generated, "samples_trained": len(trained),
            "rollout_wait_s": sum(r["batch_wait_s"] for r in rows), "trainer_s": sum(r["train_s"] for r in rows),
            "push_s": sum(r["push_s"] for r in rows),
            "checkpoint_s": sum(r.get("checkpoint_s", 0.0) for r in rows[:-1]),  # a row has one if it saved
            "tasks": [g[0] for g in groups.values()], "prompt_ids": [g[1] for g in groups.values()],
            "model": str(ckpt), "batch_reward": [r["reward"] for r in rows]}


def trl_train(py: Path, out: Path, model: str, prompts: list[dict[str, Any]], settings: dict[str, Any]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "spec.json"
    spec.write_text(json.dumps({"model": model, "prompts": prompts, "settings": settings, "out": str(out),
                                "check_prompts": len(prompts)}))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    run([str(py), str(TRL_SIDE), str(spec)], env={**env, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"},
        stdout=subprocess.DEVNULL)
    got = json.loads((out / "trl.json").read_text())
    ends = got["step_end_s"]
    return {**got, "train_s": ends[-1] if ends else 0.0, "steps": len(ends), "model": str(out / "model")}


def temper_eval(model: str, out: Path, spec: str, n: int, agent: dict[str, Any]) -> dict[str, float | None]:
    sets = [f"agent.{k}={v}" for k, v in agent.items()]
    run([str(ROOT / ".venv/bin/temper"), "eval", "--model", model, "--suite", spec, "--limit", str(n),
         "--out", str(out), "--temperature", "0", *[x for s in sets for x in ("--set", s)]],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return eval_scores(out)


def eval_scores(out: Path) -> dict[str, float | None]:
    """A `temper eval --out OUT` folder's score per task id (None: the episode failed, not scored)."""
    (items,) = out.glob("suites/*/items.jsonl")
    rows = [json.loads(x) for x in items.read_text().splitlines() if x.strip()]
    return {r["task_id"]: (None if r["failure"] else r["reward"]) for r in rows}


def eval_agent(cfg: Any) -> dict[str, Any]:
    """The agent settings every side is evaluated with: the recipe's, one turn, no retries."""
    return {"system_prompt": cfg.agent.system_prompt, "max_turns": 1, "max_turn_tokens": cfg.agent.max_turn_tokens,
            "max_answer_retries": 0, "max_context_tokens": cfg.agent.max_context_tokens}


# -- the run -------------------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=None, help="trainer steps per side (default: the recipe's)")
    ap.add_argument("--staleness", default="1,0", help="temper's orchestrator.max_staleness values (the first "
                                                       "run's trained tasks are TRL's)")
    ap.add_argument("--seeds", default=None, help="runtime.seed values, e.g. 0,1,2 (default: the recipe's); "
                                                   "several: gains paired over every (seed, task)")
    ap.add_argument("--eval-n", type=int, default=None, help="held-out tasks (default: the recipe's)")
    ap.add_argument("--work", type=Path, default=None, help="folder for the runs (default: a temporary one)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a `temper train --set` setting of temper's runs, e.g. a suite spec (repeatable)")
    ap.add_argument("--out", type=Path, default=OUT / "latest.json")
    args = ap.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    sys.path.insert(0, str(ROOT))
    from temper.envs import parse_spec
    from temper.models.registry import resolve_model
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.train import resolve_train_config

    cfg: TrainConfig = resolve_train_config(None, args.set, {}, None, create=False)[0]
    steps = args.steps or cfg.max_steps
    eval_n = args.eval_n or cfg.eval.n
    work = args.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"main_job_bench-{os.getpid()}"
    work.mkdir(parents=True, exist_ok=True)
    model = str(resolve_model(cfg.model))
    suite = parse_spec(cfg.suites[0].spec)
    tasks = {t.id: t for t in suite.tasks()}
    opt, loss, o = cfg.algorithm.optim, cfg.algorithm.loss, cfg.orchestrator
    settings = {"steps": steps, "group_size": o.group_size, "prompts_per_step": o.batch_groups, "lr": opt.lr,
                "betas": list(opt.betas), "eps": opt.eps, "grad_clip": opt.grad_clip,
                "temperature": cfg.agent.temperature, "top_p": cfg.agent.top_p,
                "max_tokens": cfg.agent.max_turn_tokens, "kl_coef": loss.kl_coef, "clip_low": loss.clip_low,
                "clip_high": loss.clip_high, "threads": os.cpu_count() or 1, "seed": cfg.runtime.seed,
                "gradient_checkpointing": cfg.algorithm.trainer.gradient_checkpointing, "temper_sets": args.set}
    if opt.min_lr_ratio != 1.0 or opt.warmup_steps or opt.weight_decay or loss.aggregation != "token_mean":
        raise SystemExit("main_job_bench: the recipe's schedule or loss is not one TRL's side is set up to match")
    py = ensure_trl()
    seeds = [int(x) for x in args.seeds.split(",")] if args.seeds else [cfg.runtime.seed]
    agent = eval_agent(cfg)
    limit = first_distinct([t.id for t in parse_spec(cfg.eval.suite).tasks()], eval_n)
    before = temper_eval(model, work / "eval-before", cfg.eval.suite, limit, agent)  # greedy: one for all seeds
    per_seed = []
    for seed in seeds:
        temper_runs: dict[int, dict] = {}
        for st in [int(x) for x in args.staleness.split(",")]:
            log(f"seed {seed}: temper train, max_staleness {st}, {steps} steps")
            temper_runs[st] = temper_train(work / f"seed{seed}" / f"temper-s{st}", st, steps, seed, args.set)
        first = temper_runs[next(iter(temper_runs))]
        prompts = [{"messages": [{"role": "system", "content": cfg.agent.system_prompt},
                                 {"role": "user", "content": tasks[tid].prompt}],
                    "answer": str(tasks[tid].payload["answer"])} for tid in first["tasks"][:steps * o.batch_groups]]
        log(f"seed {seed}: TRL GRPOTrainer, {steps} steps")
        trl = trl_train(py, work / f"seed{seed}" / "trl", model, prompts, {**settings, "seed": seed})

        bad_prompts = prompt_mismatches(first["prompt_ids"][:len(prompts)], trl["prompt_ids"])
        bad_rewards = reward_mismatches(trl["completions"], temper_score(suite, tasks))
        if bad_prompts or bad_rewards:
            raise SystemExit(f"main_job_bench: not matched (seed {seed}): prompts {bad_prompts[:5]} differ in token "
                             f"ids, {len(bad_rewards)} rewards differ (first: {bad_rewards[:1]})")
        evals = {"before": before}
        for st, r in temper_runs.items():
            evals[f"temper_s{st}"] = temper_eval(r["model"], work / f"seed{seed}" / f"eval-temper-s{st}",
                                                 cfg.eval.suite, limit, agent)
        evals["trl"] = temper_eval(trl["model"], work / f"seed{seed}" / "eval-trl", cfg.eval.suite, limit, agent)
        n_ids = len(heldout_ids(evals))
        per_seed.append({"seed": seed, "evals": evals, "temper_runs": temper_runs, "trl": trl,
                         "summary": summarize(evals, temper_runs, trl, {**settings, "seed": seed}, n_ids,
                                              len(trl["completions"]))})
        log(f"seed {seed}: " + json.dumps({k: v for k, v in per_seed[-1]["summary"].items() if "ratio" in k}))
    result = pooled(per_seed, settings) if len(per_seed) > 1 else per_seed[0]["summary"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps(result))


def pooled(per_seed: list[dict[str, Any]], settings: dict[str, Any]) -> dict[str, Any]:
    """Several seeds as one comparison: gains paired over every (seed, task), training minutes and sample
    counts averaged over the seeds; each seed's own summary under `per_seed`."""
    def merged(name: str) -> dict[str, float | None]:
        return {f"{r['seed']}/{tid}": v for r in per_seed for tid, v in r["evals"][name].items()}

    def mean_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
        keys = [k for k, v in runs[0].items() if isinstance(v, int | float) and k != "staleness"]
        return {**runs[0], **{k: sum(r[k] for r in runs) / len(runs) for k in keys}}

    names = list(per_seed[0]["evals"])
    evals = {name: merged(name) for name in names}
    temper_runs = {st: mean_run([r["temper_runs"][st] for r in per_seed]) for st in per_seed[0]["temper_runs"]}
    trl = mean_run([r["trl"] for r in per_seed])
    generated = round(sum(len(r["trl"]["completions"]) for r in per_seed) / len(per_seed))
    out = summarize(evals, temper_runs, trl, {**settings, "seeds": [r["seed"] for r in per_seed]},
                    len(heldout_ids(evals)), generated)
    out["heldout_n"] = len(heldout_ids(per_seed[0]["evals"]))
    out["per_seed"] = [r["summary"] for r in per_seed]
    return out


def summarize(evals: dict[str, dict], temper_runs: dict[int, dict], trl: dict, settings: dict, n_heldout: int,
              trl_generated: int) -> dict[str, Any]:
    from temper.evals.stats import bootstrap_mean

    def side(name: str, train_s: float, generated: int, trained: int) -> dict[str, Any]:
        scores = [v for v in evals[name].values() if v is not None]
        ci, d = bootstrap_mean(scores), gain(evals["before"], evals[name])
        return {"after": round(ci.mean, 4), "after_ci": [round(ci.low, 4), round(ci.high, 4)],
                "gain": d["diff"], "gain_ci": [d["ci_low"], d["ci_high"]], "paired_n": d["paired"],
                "train_min": round(train_s / 60, 2), "gain_per_min": round(d["diff"] / (train_s / 60), 4),
                "samples_generated": generated, "samples_trained": trained}

    before = bootstrap_mean([v for v in evals["before"].values() if v is not None])
    out: dict[str, Any] = {"heldout_n": n_heldout, "before": round(before.mean, 4),
                           "before_ci": [round(before.low, 4), round(before.high, 4)]}
    out["trl"] = side("trl", trl["train_s"], trl_generated, trl_generated)
    for s, r in temper_runs.items():
        t = out[f"temper_s{s}"] = side(f"temper_s{s}", r["train_s"], r["samples_generated"], r["samples_trained"])
        # where the training minutes went: waiting for rollouts, the trainer's steps, weights to the engine and
        # the checkpoints (the last one is after the clock stops), bookkeeping
        for k in ("rollout_wait", "trainer", "push", "checkpoint"):
            t[f"{k}_min"] = round(r[f"{k}_s"] / 60, 2)
        t["other_min"] = round(t["train_min"] - t["rollout_wait_min"] - t["trainer_min"] - t["push_min"]
                               - t["checkpoint_min"], 2)
        tr = out["trl"]["gain_per_min"]
        out[f"gain_per_min_ratio_s{s}"] = round(t["gain_per_min"] / tr, 3) if tr > 0 else None
        out[f"gain_ratio_s{s}"] = round(t["gain"] / out["trl"]["gain"], 3) if out["trl"]["gain"] > 0 else None
    out["settings"] = settings
    out["commit"] = commit()
    out["date"] = time.strftime("%Y-%m-%d")
    out["unmatched"] = UNMATCHED
    out["versions"] = trl["versions"]
    out["checks"] = {"prompts_token_identical": len(trl["prompt_ids"]), "rewards_equal": trl_generated}
    return out


def plot(result: dict[str, Any], path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from temper.runtime import pyplot

    plt = pyplot()
    sides = [k for k in result if k.startswith(("temper_s", "trl")) and isinstance(result[k], dict)]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for i, k in enumerate(sides):
        r = result[k]
        a.errorbar([i], [r["gain"]], yerr=[[r["gain"] - r["gain_ci"][0]], [r["gain_ci"][1] - r["gain"]]], fmt="o",
                   capsize=6, color=f"C{i}")
        b.bar([i], [r["gain_per_min"]], color=f"C{i}")
    for ax, title in ((a, "held-out gain (paired 95% CI)"), (b, "held-out gain per minute of training")):
        ax.set_xticks(range(len(sides)), sides)
        ax.set_title(title)
        ax.grid(alpha=0.3)
    fig.suptitle(f"temper's default job vs TRL GRPOTrainer (n={result['heldout_n']} held-out, "
                 f"before {result['before']:.3f})")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
