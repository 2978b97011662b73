"""`temper train`: the main loop, in one place.

    evaluate before -> start the rollout producer -> for each step: take a batch from the store
    (staleness-bounded), train, publish weights to the engines, checkpoint + commit the batch's
    consumption marks -> evaluate after -> summary, plots.
"""

import asyncio
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from temper import cores
from temper.envs import parse_spec
from temper.envs.suite import Suite
from temper.errors import TemperError
from temper.evals.compare import difference
from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.metering import rss_mb
from temper.evals.suite_runner import Gate
from temper.evals.summary import task_scores
from temper.orchestrator.backend_solver import BackendSolver
from temper.orchestrator.backends import make_backend
from temper.orchestrator.checkpointer import Checkpointer
from temper.orchestrator.config import TrainConfig
from temper.orchestrator.pipeline import Group, Pipeline
from temper.orchestrator.plots import write_plots
from temper.orchestrator.progress import Progress
from temper.orchestrator.run_dir import RunDir, summary_markdown, writer_identity
from temper.orchestrator.scheduler import TaskScheduler
from temper.orchestrator.store import Store
from temper.orchestrator.tracking import Trackers
from temper.runtime import apply_runtime, resolve_device


def train(cfg: TrainConfig, run: RunDir) -> dict[str, Any]:
    return asyncio.run(_train(cfg, run))


async def _train(cfg: TrainConfig, run: RunDir) -> dict[str, Any]:
    from temper.models import load_model
    from temper.orchestrator.ray_trainer_group import RayTrainerGroup
    from temper.rl import Trainer
    from temper.rl.trainer_group import TrainerGroup

    t0 = time.monotonic()
    apply_runtime(cfg.runtime)
    suites = [parse_spec(s.spec) for s in cfg.suites]  # a bad spec fails here, before any model loads
    eval_suite = parse_spec(cfg.eval.suite) if cfg.eval.suite else None
    # distinct tasks: the harness scores a task id once (generated suites repeat a few problems)
    eval_tasks = list({t.id: t for t in eval_suite.tasks()}.values())[:cfg.eval.n] if eval_suite else []
    store = Store(run.store)
    committed, ckpt = store.last_committed_step()
    device = resolve_device(cfg.runtime.device)
    ranks = cfg.algorithm.trainer.world_size  # > 1: FSDP2 ranks in processes of their own (trainer_group.py)
    loaded = load_model(cfg.model, device=device if ranks == 1 else "cpu")  # ranks load their own copies
    # on the Ray backend the ranks are Ray actors (placed by orchestrator.ray.trainer_resources), else local processes
    group = (partial(RayTrainerGroup, ray_cfg=cfg.orchestrator.ray) if cfg.orchestrator.backend == "ray"
             else TrainerGroup)
    temperature = cfg.agent.temperature or 1.0  # the rollouts' sampling temperature (greedy: plain softmax)
    trainer = (Trainer(loaded.model, cfg.algorithm, pad_id=loaded.tokenizer.pad_token_id, temperature=temperature)
               if ranks == 1 else
               group(cfg.model, cfg.algorithm, ranks, run.path / "trainer", device=str(device),
                     threads=cfg.runtime.threads, seed=cfg.runtime.seed, temperature=temperature))
    scheduler = TaskScheduler.build(list(zip(cfg.suites, suites, strict=True)), cfg.orchestrator.curriculum,
                                    cfg.runtime.seed, exclude={t.id for t in eval_tasks})
    ranks_seen = {"trainer_world_size": ranks, "trainer_pids": trainer.pids,
                  "trainer_nodes": getattr(trainer, "nodes", None)}  # a group's: hostnames, or Ray node ids
    if ckpt is not None:  # resume: the checkpoint the store last committed, then undo what came after it
        trainer.load_checkpoint(run.checkpoints / ckpt)
        scheduler.load_state_dict(trainer.data_cursor["scheduler"])
        run.audit("resume", step=committed, checkpoint=ckpt, **store.recover(committed), **writer_identity(),
                  **ranks_seen)
    else:
        store.recover(0)
        run.audit("start", config=cfg.model_dump(mode="json"), **writer_identity(), **ranks_seen)
    backlog = [Group(g, store.group(g)) for g in store.complete_groups()]
    specs = [s.spec for s in cfg.suites] + ([cfg.eval.suite] if cfg.eval.suite else [])
    trackers = Trackers(cfg.logging, run.path, cfg.model_dump(mode="json"))  # a missing package fails here
    progress = Progress(cfg.max_steps, cfg.logging.progress)
    summary: dict[str, Any] = {}
    backend: Any = None
    pipe: Pipeline | None = None
    # Every trainer step (and checkpoint) on the same thread: glibc gives each thread its own malloc arena, and a step's
    # freed activations (GBs) stay in that arena, so steps hopping across a pool's threads grew the
    # process by ~1 GB a step (measured: 5.5 -> 12 GB over 5 steps of the default recipe).
    trainer_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="trainer")
    cores.install(_core_share(cfg, ranks, device))
    checkpointer = Checkpointer(trainer, store, run.checkpoints, loaded.tokenizer, trainer_thread,
                                background=cfg.orchestrator.async_checkpoints and ranks == 1)
    loop = asyncio.get_running_loop()
    try:
        backend = make_backend(cfg, specs, str(run.path / "sandbox"), run_dir=run.path, dtype=trainer.dtype)
        with progress:
            if ckpt is not None or getattr(backend, "attached", False):  # a server may hold any weights
                await backend.push_weights(trainer.policy_state_dict(), trainer.policy_version)
            before = run.read_json("eval_before.json")
            if eval_suite and cfg.eval.before and before is None:
                before = await _evaluate(backend, len(suites), eval_suite, eval_tasks, cfg, run, "before", progress)
                run.write_json("eval_before.json", before)
                run.audit("eval", which="before", **{k: v for k, v in before.items() if k != "scores"})
            pipe = Pipeline(cfg.orchestrator, backend, scheduler, store, trainer.policy_version, backlog,
                            cfg.runtime.seed, refill=cfg.algorithm.drops_zero_variance)
            pipe.start()
            pending: list[tuple[int, list[str], list[str], dict[str, float]]] = []
            mid: asyncio.Task | None = None  # a low-priority evaluation during training
            last = time.monotonic()
            step = committed  # trainer steps, skipped ones included (a batch with no signal changes no weight)
            while step < cfg.max_steps:
                batch = await pipe.next_batch()
                t_train, version = time.monotonic(), trainer.policy_version
                alone = pipe.rollouts_idle()  # no rollout can start before this step ends: it may take every core
                stats = await loop.run_in_executor(trainer_thread, _on_cores, alone, trainer.step, batch.trajectories)
                train_s = time.monotonic() - t_train
                step += 1
                t_push = time.monotonic()
                if not stats.skipped:
                    await backend.push_weights(trainer.policy_state_dict(), trainer.policy_version)
                push_s = time.monotonic() - t_push
                await pipe.published(trainer.policy_version, batch)
                row = {**_row(step, stats.as_metrics(), batch, pipe, backend, time.monotonic() - last, train_s, cfg,
                              t0), "push_s": push_s, "train_version": version, **_cores_row(alone)}
                last = time.monotonic()
                pending.append((step, [g.id for g in batch.groups], [g.id for g in batch.replayed], row))
                if step % cfg.orchestrator.save_every == 0 or step >= cfg.max_steps:
                    trainer.data_cursor = {"scheduler": scheduler.state_dict(), "step": step}
                    row.update(await checkpointer.save(pending, row))
                    pending = []
                    row["checkpoint_s"] = time.monotonic() - last  # in the next step's step_s
                if cfg.eval.every and step % cfg.eval.every == 0 and eval_suite and not (mid and not mid.done()):
                    mid = asyncio.create_task(_mid_eval(backend, len(suites), eval_suite, eval_tasks, cfg, pipe, run,
                                                        step))
                run.log_metrics(row)
                trackers.log(row)
                progress.step(row)
            await checkpointer.drain()  # the last checkpoint is committed before anything reads the store
            await pipe.stop()
            if mid is not None:  # an evaluation asked for during training finishes and is recorded
                await mid
            after = None
            if eval_suite and cfg.eval.after:
                after = await _evaluate(backend, len(suites), eval_suite, eval_tasks, cfg, run, "after", progress,
                                        folder=f"after-step-{step}")
                run.write_json("eval_after.json", after)
                run.audit("eval", which="after", **{k: v for k, v in after.items() if k != "scores"})
            summary = _summary(cfg, run, store, before, after, time.monotonic() - t0)
    finally:
        await checkpointer.close()
        if pipe is not None:  # after an error too: no group task may run on into a closed store
            await pipe.stop()
        if backend is not None:
            backend.close()
        trainer_thread.shutdown(wait=True)
        trainer.close()
        trackers.close()
        store.close()
        cores.install(None)
    return summary


def _on_cores(alone: bool, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args) on the trainer's thread, with every core when `alone` and a share is installed."""
    share = cores.current()
    return share.run_trainer(alone, fn, *args) if share is not None else fn(*args)


def _cores_row(alone: bool) -> dict[str, float]:
    """The step's core share: whether the trainer had every core, and the engine's steps so far that had them."""
    share = cores.current()
    if share is None:
        return {}
    return {"trainer_all_cores": float(alone), "engine_steps_all_cores": float(share.alone["engine"])}


def _core_share(cfg: TrainConfig, ranks: int, device: Any) -> cores.CoreShare | None:
    """The engine's and the trainer's threads share the cores when both run in this process on the CPU."""
    total = len(os.sched_getaffinity(0))
    if (not cfg.runtime.share_cores or cfg.orchestrator.backend != "local" or ranks != 1 or device.type != "cpu"
            or cfg.runtime.threads <= 0 or total <= cfg.runtime.threads):
        return None
    return cores.CoreShare(cfg.runtime.threads, total)


async def _evaluate(backend: Any, suite_index: int, suite: Suite, tasks: list, cfg: TrainConfig, run: RunDir,
                    which: str, progress: Progress | None = None, gate: Gate | None = None,
                    folder: str | None = None) -> dict[str, Any]:
    """One greedy episode per held-out task through the evaluation harness (its records and summary in
    RUN/eval/<folder>/, resumed from there); returns what eval_<which>.json holds: n, mean_reward,
    ci_low, ci_high, failed, and scores (task id -> score; None: an infrastructure failure, left out)."""
    n, done, t = len(tasks), 0, time.monotonic()

    def solved() -> None:
        nonlocal done
        done += 1
        progress.note(f"evaluating {which}: {done}/{n}")  # the live table is training's: no second bar

    solver = BackendSolver(backend, suite_index, cfg.eval.metric, cfg.model, solved if progress is not None else None)
    # the harness's settings for bookkeeping: the episodes run on the workers' eval agent (WorkerSpec.of)
    settings = EvalConfig(concurrency=cfg.orchestrator.concurrency, progress=False,
                          agent={"temperature": cfg.eval.temperature})
    result = await evaluate(solver, [(suite, tasks)], settings, run.path / "eval" / (folder or which), gate=gate,
                            report=False)
    (suite_run,) = result.suites.values()
    s, scores = result.summary["suites"][suite_run.spec], task_scores(suite_run.records)
    out = {"n": s["n"], "mean_reward": s["mean_reward"], "ci_low": s["ci_low"], "ci_high": s["ci_high"],
           "failed": s["infra_failures"], "wall_s": round(time.monotonic() - t, 2),
           "scores": {task.id: scores.get(task.id) for task in tasks}}
    if progress is not None and out["n"]:
        progress.note(f"eval {which}: {out['mean_reward']:.3f} [{out['ci_low']:.3f}, {out['ci_high']:.3f}] (n={n})")
    return out


async def _mid_eval(backend: Any, suite_index: int, suite: Suite, tasks: list, cfg: TrainConfig, pipe: Pipeline,
                    run: RunDir, step: int) -> None:
    """Held-out evaluation while training goes on; its episodes only use capacity rollouts leave idle."""
    r = await _evaluate(backend, suite_index, suite, tasks, cfg, run, f"step-{step}", gate=pipe.low_priority)
    run.audit("eval", which=f"step {step}", **{k: v for k, v in r.items() if k != "scores"})


def _row(step: int, m: dict[str, float], batch: Any, pipe: Pipeline, backend: Any, step_s: float, train_s: float,
         cfg: TrainConfig, t0: float) -> dict[str, Any]:
    c, counters = pipe.store.group_counts(), backend.counters()  # the run so far, resumed processes included
    rewards = [t.reward for t in batch.trajectories if t.trainable]
    passed = [t.reward_components.get(cfg.eval.metric, t.reward) for t in batch.trajectories if t.trainable]
    elapsed = time.monotonic() - t0
    row = {
        "step": step, "reward": sum(rewards) / max(1, len(rewards)), "pass_rate": sum(passed) / max(1, len(passed)),
        "rollout_tok_s": counters.get("generated_tokens", 0.0) / max(elapsed, 1e-9),
        "train_tok_s": m.get("tokens", 0.0) / max(train_s, 1e-9),
        "staleness": sum(batch.staleness) / max(1, len(batch.staleness)),
        "staleness_max": max(batch.staleness, default=0), "queue": len(pipe.ready), "running": pipe.running,
        "sandbox_episodes_per_s": counters.get("sandbox_episodes", 0.0) / max(elapsed, 1e-9),
        "failures": c["failed_episodes"], "retries": c["retries"], "quarantined": len(pipe.store.quarantined()),
        "filtered_groups": c["groups_filtered"], "stale_groups": c["groups_stale"],
        "generated_per_kept": generated_per_kept(c),
        "replayed_groups": len(batch.replayed),
        "batch_wait_s": batch.wait_s, "train_s": train_s, "step_s": step_s, "elapsed_s": elapsed,
        **_episode_phases(batch.trajectories),
        "rss_mb": rss_mb(),
        "eta_s": (cfg.max_steps - step) * elapsed / max(1, step),
        **{f"trainer/{k}": v for k, v in m.items()},
        **{f"injected/{k[9:]}": v for k, v in counters.items() if k.startswith("injected_")},
        **backend.gauges(),  # weight_update_ms (per server with vllm), servers_up
    }
    return row


def generated_per_kept(counts: dict[str, int]) -> float:
    """Groups generated to the end (kept, filtered for zero reward variance, or too stale) per group kept for
    training, over the run so far: 1 when no rollout is thrown away."""
    generated = counts["groups_completed"] + counts["groups_filtered"]
    return round(generated / max(1, counts["groups_completed"] - counts["groups_stale"]), 3)


def _episode_phases(trajectories: list) -> dict[str, float]:
    """Seconds the batch's episodes spent in each phase, summed over episodes (they run concurrently, so these
    add up to more than the wall-clock): generating, in tools, verifying, setting up."""
    first = [t for t in trajectories if t.info.get("window", 0) == 0]  # one per episode: windows share timings
    return {f"episodes_{k}": sum(t.timings.get(k, 0.0) for t in first)
            for k in ("generate_s", "tools_s", "verify_s", "reset_s")}


def _summary(cfg: TrainConfig, run: RunDir, store: Store, before: dict | None, after: dict | None,
             wall_s: float) -> dict[str, Any]:
    rows = run.metrics()
    diff = None
    if before and after:  # after - before: a paired bootstrap over the tasks both scored
        scored_before, scored_after = ({k: v for k, v in e["scores"].items() if v is not None} for e in (before, after))
        diff = difference(scored_before, scored_after)
    counts = store.training_counts()  # every process of the run, resumed ones included
    summary = {
        "run": str(run.path), "model": cfg.model, "suites": [s.spec for s in cfg.suites], "eval_suite": cfg.eval.suite,
        "backend": cfg.orchestrator.backend, "max_staleness": cfg.orchestrator.max_staleness,
        "steps": rows[-1]["step"] if rows else 0, "wall_s": wall_s,
        "before": {k: v for k, v in before.items() if k != "scores"} if before else None,
        "after": {k: v for k, v in after.items() if k != "scores"} if after else None,
        "difference": diff,
        "training": {**counts, "generated_per_kept": generated_per_kept(counts)},
        "store": store.counts(), "quarantined": store.quarantined(),
    }
    run.write_json("summary.json", summary)
    if cfg.logging.plots:
        write_plots(rows, run.plots)
    (run.path / "summary.md").write_text(summary_markdown(summary))
    return summary


def resolve_train_config(config: Any, sets: list[str] | None, flags: dict[str, Any], resume: str | None,
                         create: bool = True) -> tuple[TrainConfig, RunDir | None]:
    """A new run (recipe + config file + overrides + flags) or a resumed one (its saved config + overrides);
    `create`: make the new run's folder (else None)."""
    from temper.config import load_config

    if resume is not None:
        if config is not None:
            raise TemperError("--resume takes the run's own config.yaml; drop --config (use --set to change a field)")
        run, _ = RunDir.open(resume)
        cfg = load_config(TrainConfig, run.path / "config.yaml", sets or [], {**flags, "out": str(run.path)})
        return cfg, run
    cfg = load_config(TrainConfig, config, sets or [], flags)
    for spec in [s.spec for s in cfg.suites] + ([cfg.eval.suite] if cfg.eval.suite else []):
        parse_spec(spec)  # an unknown suite fails here, before a run folder exists
    if not create:
        return cfg, None
    return cfg, RunDir.create(cfg)
