"""Rewards are finite numbers in their suite's range, wherever they come from: `Reward` refuses NaN and
infinities, a user's reward function that returns one scores the agent's 0 with a flag, a value out of
range is the agent's 0, the trainer refuses non-finite advantages, and eval summaries and plots never
carry a non-JSON number."""

import asyncio
import json
import math

import pytest
import torch

from temper.envs.env import SingleTurnEnv
from temper.envs.reward import Reward, RewardValueError, in_range
from temper.envs.task import Task
from temper.errors import TemperError
from temper.evals import plots
from temper.evals.records import ItemRecord
from temper.evals.summary import summarize_suite, to_json
from temper.rl.advantages import RunningBaseline, group_indices, grpo, outcome_advantages
from temper.rl.config import AdvantageConfig

BAD = [math.nan, math.inf, -math.inf, 10**400]


@pytest.mark.parametrize("x", BAD)
def test_reward_refuses_non_finite_values_and_components(x) -> None:
    with pytest.raises(RewardValueError):
        Reward(value=x)
    with pytest.raises(RewardValueError):
        Reward(value=1.0, components={"style": x})
    with pytest.raises(RewardValueError):
        Reward.coerce({"reward": x})
    with pytest.raises(RewardValueError):
        Reward.coerce(x)
    assert Reward.coerce({"a": 1, "b": 0.5}).value == 0.75  # control


def test_out_of_range_is_the_agents_zero_with_a_flag() -> None:
    r = in_range(Reward(value=5.0), (0.0, 1.0))
    assert r.ok and r.value == 0.0 and r.info["reward_out_of_range"] == 5.0
    assert in_range(Reward(value=1.0), (0.0, 1.0)).value == 1.0
    assert in_range(Reward(value=5.0), None).value == 5.0


class _Fixed(SingleTurnEnv):
    def __init__(self, out):
        super().__init__(Task.make("s", "d", "p"))
        self.out = out

    async def verify(self, answer: str) -> Reward:
        return Reward.coerce(self.out)


@pytest.mark.parametrize(("out", "value", "flag"), [(math.nan, 0.0, "reward_not_finite"),
                                                     ({"reward": math.inf}, 0.0, "reward_not_finite"),
                                                     (1e300, 0.0, "reward_out_of_range"),
                                                     (-1, 0.0, "reward_out_of_range"),
                                                     (0.5, 0.5, None), (1, 1.0, None)])
def test_a_verifier_returning_a_bad_number_scores_the_agents_zero(out, value, flag) -> None:
    r = asyncio.run(_Fixed(out).step("x")).reward
    assert r.ok and r.value == value
    assert (flag in r.info) if flag else not r.info


def test_the_trainer_refuses_non_finite_rewards_and_advantages() -> None:
    groups = group_indices(["a", "a", "b", "b"])
    rewards = torch.tensor([1.0, 0.0, math.nan, 1.0])
    assert torch.isnan(grpo(rewards, groups)[2:]).all()  # what one NaN does to its group
    for est in ("grpo", "dr_grpo", "rloo", "reinforce"):
        with pytest.raises(TemperError, match="non-finite reward"):
            outcome_advantages(rewards, groups, AdvantageConfig(estimator=est), RunningBaseline())
        ok = outcome_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), groups, AdvantageConfig(estimator=est),
                                RunningBaseline())
        assert torch.isfinite(ok).all()


def test_eval_summaries_are_strict_json_and_plots_skip_what_is_not_a_number(tmp_path) -> None:
    records = [ItemRecord(suite="s", task_id="a", sample=0, domain="d", reward=math.inf),
               ItemRecord(suite="s", task_id="b", sample=0, domain="d", reward=1.0)]
    s = summarize_suite(records, samples=1)
    text = to_json({"suites": {"s": s}})
    assert "Infinity" not in text and "NaN" not in text and json.loads(text)["suites"]["s"]["mean_reward"] is None
    json.dumps(s, allow_nan=False)  # the harness's own dump cannot write a non-JSON number either
    summary = {"suites": {"s": {"mean_reward": math.inf, "ci_low": 0.0, "ci_high": math.inf},
                          "t": {"mean_reward": 0.5, "ci_low": 0.4, "ci_high": 0.6}}}
    assert plots.suite_scores(summary, tmp_path / "scores.png").is_file()
    assert plots.suite_scores({"suites": {"s": {"mean_reward": math.nan, "ci_low": 0, "ci_high": 1}}},
                              tmp_path / "none.png") is None
