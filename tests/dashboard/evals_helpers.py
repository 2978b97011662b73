"""Helpers of the eval/envqa dashboard tests: real folders made by temper's own code, small enough for seconds.

- `make_grid_eval`: `evaluate` with planted answers (two thirds right; in the grid, all right for short
  contexts and at depth 0) on two suites, a noisy copy of one (robustness) and the long-context grid with its curves.
- `make_envqa_report`: `run_envqa` over a few planted task folders (a good task, a near copy of it, a
  distinct one, a trivially-passing one) with the toy model as the policy: real verdicts, pass rates
  (the toy model solves nothing, the trivial verifier passes anything) and a duplicate cluster.
"""

import asyncio
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_async(coro: Any) -> Any:
    """asyncio.run in a thread of its own: Playwright's sync API keeps an event loop in the test's thread."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()
ARITH = "arithmetic:n=12,seed=1"
SUITES = [ARITH, f"noisy:suite=({ARITH}),rate=0.3", "longctx:task=niah,length=100,n=4,haystack=generated"]


def make_grid_eval(out: Path) -> dict[str, Any]:
    from temper.evals.config import EvalConfig
    from temper.evals.harness import evaluate
    from temper.evals.solvers import AnswerSolver

    def answer(task: Any, sample: int) -> str:
        length = next((int(t[3:]) for t in task.tags if t.startswith("len") and t[3:].isdigit()), 0)
        coin = (sample + int(task.id[:4], 16)) % 3 != 0  # a fixed two thirds of the items
        right = coin if length in (0, 100) else length <= 256 or "depth0" in task.tags or coin
        return f"<answer>{task.oracle if right else 'lost'}</answer>"

    cfg = EvalConfig.from_recipe(dict(progress=False, samples=2))
    cfg.grid.lengths, cfg.grid.depths, cfg.grid.n = [64, 256, 1024, 2048], [0.0, 0.5, 1.0], 2
    cfg.grid.tasks, cfg.grid.haystack = ["niah", "vartrack"], "generated"
    return run_async(evaluate(AnswerSolver(answer), SUITES, cfg, out, grid=True)).summary


def make_envqa_report(tmp: Path) -> tuple[Path, dict[str, Any]]:
    """(report folder, report.json's content)."""
    sys.path.insert(0, str(ROOT / "tests" / "envqa"))
    from envqa_plant import PASS_IF, median_task, plant_good, task

    from temper.envqa import EnvQAConfig, run_envqa
    from temper.models.toy import make_toy_model

    root = tmp / "tasks"
    root.mkdir(parents=True)
    plant_good(root)
    median_task(root, "good-median-reworded", rename=True)
    task(root, "bad-trivial", "Write the number of lines of /app/data.txt to /app/n.txt.",
         "wc -l < /app/data.txt > /app/n.txt\n", PASS_IF.format(cond="[ -f /app/data.txt ]"), {"data.txt": "a\nb\n"})
    model = make_toy_model(tmp / "toy", positions=4096)  # room for the agent's prompt, in word tokens
    out = tmp / "qa"
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={root}", model=str(model), samples=4, oracle_runs=1,
        against=[],
                      agent={"max_turns": 1, "max_turn_tokens": 4, "max_context_tokens": 4096}, out=str(out)))
    return out, run_async(run_envqa(cfg))
