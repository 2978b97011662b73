"""Evaluation harness: pass@k, bootstrap intervals, long-context grids, run comparison.

    run = await evaluate(solver, ["humaneval"], EvalConfig.from_recipe(), "runs/eval")   # see docs/evals.md
    cmp = compare_runs("runs/before", "runs/after")

`ModelSolver` (temper.evals.model_solver: the engine and the agent loop) is imported from its
module, so that the harness alone does not pull in the engine.
"""

from temper.evals.compare import Comparison, compare_runs
from temper.evals.config import EvalConfig
from temper.evals.harness import EvalRun, evaluate
from temper.evals.solvers import AnswerSolver, NoopSolver, OracleSolver, Outcome, Solver

__all__ = ["AnswerSolver", "Comparison", "EvalConfig", "EvalRun", "NoopSolver", "OracleSolver", "Outcome", "Solver",
           "compare_runs", "evaluate"]
