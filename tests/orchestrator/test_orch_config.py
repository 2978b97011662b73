"""One knob per concept in TrainConfig: the rollouts' temperature is agent.temperature, and the trainer is built
with it (greedy rollouts: a plain softmax); zero-variance groups are dropped by one switch that rollouts follow."""

import pytest

from temper.orchestrator.config import TrainConfig
from temper.rl.config import RLConfig


def test_the_trainer_has_no_temperature_of_its_own():
    assert "temperature" not in RLConfig.model_fields
    with pytest.raises(ValueError, match=r"unknown field|Extra inputs"):
        TrainConfig.from_recipe({"algorithm": {"temperature": 1.0}})
    assert TrainConfig.from_recipe().agent.temperature == 0.8


def test_one_switch_drops_and_refills_zero_variance_groups():
    assert "dynamic_sampling" not in TrainConfig.model_fields["orchestrator"].annotation.model_fields
    assert TrainConfig.from_recipe().algorithm.drops_zero_variance
    off = TrainConfig.from_recipe({"algorithm": {"filter": {"drop_zero_variance": False}}})
    assert not off.algorithm.drops_zero_variance
    # REINFORCE and GAE learn from single trajectories: nothing is dropped, so nothing is refilled
    single = TrainConfig.from_recipe({"algorithm": {"advantages": {"estimator": "reinforce"}}})
    assert not single.algorithm.drops_zero_variance
