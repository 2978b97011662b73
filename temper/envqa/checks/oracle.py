"""Oracle reproducibility: the reference solution passes, N times, in fresh sandboxes, with the
same reward and components every time. A verdict of `broken` (never passes), `flaky` (passes
sometimes, or the figures differ between passing runs), `too-slow` (it fails only because it hit
a time or memory limit) or `ok`, with the log of the first failing run."""

import time
from typing import Any

from temper.envqa.checks.session import Clock, opened
from temper.envs.reward import Reward
from temper.envs.sandboxes import is_sandbox_crash
from temper.envs.suite import Suite
from temper.envs.suites.terminal import TerminalEnv
from temper.envs.task import Task
from temper.sandbox.aio import call

LOG_CHARS = 2000
RESOURCE_LIMITS = ("wall_time", "cpu", "memory")  # an output cap is not a resource problem


async def _terminal_run(env: TerminalEnv) -> tuple[Reward, dict[str, Any]]:
    """TerminalEnv.run_oracle, step by step, to time solve.sh alone and read its memory peak (of the largest of
    its processes: the sandbox's wait4, so an image without python3 is measured too)."""
    await call(env.sandbox.upload, env.folder.path / "solution", "/solution")
    r = await env.exec(["bash", "/solution/solve.sh"], timeout=env.folder.agent_timeout_s, cwd=env.workdir,
                       user=env.admin)
    reward = await env.clean_verify("oracle")  # records how long the task verifies, for agents' timeouts
    log = (r.stdout + r.stderr).decode(errors="replace")[-LOG_CHARS:]
    return reward, {"oracle_exit_code": r.exit_code, "oracle_s": round(r.duration_s, 4), "cpu_s": round(r.cpu_s, 4),
                    "limit": r.limit, "oracle_log": log,
                    "peak_rss_mb": round(r.peak_rss_kb / 1024, 1) if r.peak_rss_kb else None}


async def one_run(suite: Suite, task: Task, pool: Any, clock: Clock) -> dict[str, Any]:
    try:
        async with opened(suite, task, pool, clock) as env:
            if isinstance(env, TerminalEnv):
                reward, extra = await _terminal_run(env)
            else:
                t0 = time.perf_counter()
                reward = await env.run_oracle()
                extra = {"oracle_s": round(time.perf_counter() - t0, 4), "limit": None, "peak_rss_mb": None}
    except Exception as exc:  # the harness failed: recorded as such, never as the task's answer
        kind = "sandbox_crash" if is_sandbox_crash(exc) else "harness_error"
        reward = Reward(info={"error": f"{type(exc).__name__}: {exc}"})
        extra = {"limit": None, "harness_failure": kind}
    failure = reward.failure.value if reward.failure is not None else extra.get("harness_failure")
    info = reward.info
    log = "\n".join(str(x) for x in (extra.pop("oracle_log", ""), info.get("test_output", ""), info.get("error", ""))
                    if x)
    return {"value": reward.value, "components": reward.components, "failure": failure,
            "test_exit_code": info.get("test_exit_code"), **extra, "log": log[-LOG_CHARS:]}


def passed(run: dict[str, Any], threshold: float) -> bool:
    return run["failure"] is None and run["value"] >= threshold


def _signature(run: dict[str, Any]) -> tuple[Any, ...]:
    comps = tuple(sorted((k, round(v, 6)) for k, v in run["components"].items()))
    return round(run["value"], 6), comps, run["failure"], run.get("test_exit_code")


def judge(runs: list[dict[str, Any]], threshold: float) -> dict[str, Any]:
    ok = [passed(r, threshold) for r in runs]
    agree = len({_signature(r) for r in runs}) == 1
    failing = [i for i, p in enumerate(ok) if not p]
    if not failing:
        verdict = "ok" if agree else "flaky"
    elif all(runs[i].get("limit") in RESOURCE_LIMITS for i in failing):
        verdict = "too-slow"  # it fails only where a limit stopped it: a resource problem, reported there
    else:
        verdict = "broken" if len(failing) == len(runs) else "flaky"
    out: dict[str, Any] = {"verdict": verdict, "passes": sum(ok), "runs": len(runs), "agree": agree}
    if failing:
        out["failing_run"] = failing[0]
        out["failing_log"] = runs[failing[0]]["log"]
    return out


async def check_oracle(suite: Suite, task: Task, pool: Any, n: int, threshold: float, clock: Clock) -> dict[str, Any]:
    """Run the oracle n times, one after another (each in a freshly reset sandbox)."""
    if task.oracle is None:
        return {"verdict": "broken", "passes": 0, "runs": 0, "agree": True, "error": "the task has no oracle"}
    runs = [await one_run(suite, task, pool, clock) for _ in range(n)]
    return {**judge(runs, threshold), "details": runs}
