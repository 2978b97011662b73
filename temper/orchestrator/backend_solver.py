"""`BackendSolver`: how `temper train` evaluates through the evaluation harness (temper.evals). Each
item is one greedy eval episode on the training backend's rollout workers (the same engines,
sandboxes and retries as training rollouts), scored on one reward component (correctness, never
format). An episode that still fails after its retries is an infrastructure failure of its item:
the harness leaves it out of every score, never counts it 0."""

import itertools
from collections.abc import Callable

from temper.envs.reward import Reward
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.evals.solvers import Outcome
from temper.orchestrator.backends.protocol import Backend
from temper.orchestrator.config import RetryConfig
from temper.orchestrator.faults import with_retries
from temper.trajectory import FailureKind


class BackendSolver:
    name = "backend"

    def __init__(self, backend: Backend, suite_index: int, metric: str, model_name: str | None = None,
                 on_solved: Callable[[], None] | None = None) -> None:
        self.backend, self.suite_index, self.metric, self.on_solved = backend, suite_index, metric, on_solved
        self.model_name = model_name  # for the harness's summary.json
        self._turn = itertools.count()  # items spread over the workers in turn

    async def solve(self, suite: Suite, task: Task, sample: int) -> Outcome:
        worker = next(self._turn) % self.backend.num_workers
        a = await with_retries(lambda _: self.backend.run_episode(worker, self.suite_index, task.id,
                                                                  f"eval-{task.id}", 0, eval_mode=True),
                               RetryConfig())
        if self.on_solved is not None:
            self.on_solved()
        if a.failure is not None or not a.trajectories:
            return Outcome(Reward.infra(a.failure or FailureKind.WORKER_ERROR, a.message or "no trajectory"))
        t = a.trajectories[-1]  # the last context window holds the final reward
        generated = sum(sum(x.loss_mask) for x in a.trajectories)
        return Outcome(Reward(float(t.reward_components.get(self.metric, t.reward)), dict(t.reward_components)),
                       tokens_in=sum(len(x.token_ids) for x in a.trajectories) - generated, tokens_out=generated,
                       turns=int(t.info.get("turns", 0)),
                       info={"attempts": a.attempts, **{k: t.info[k] for k in ("tool_calls", "tool_errors")
                                                        if k in t.info}})
