"""TrainConfig ties the trainer's temperature to the rollouts' unless the user sets it."""

from temper.orchestrator.config import TrainConfig


def test_trainer_temperature_follows_the_rollout_temperature():
    assert TrainConfig().algorithm.temperature == TrainConfig().agent.temperature == 0.8
    assert TrainConfig.model_validate({"agent": {"temperature": 1.3}}).algorithm.temperature == 1.3
    assert TrainConfig.model_validate({"agent": {"temperature": 0.0}}).algorithm.temperature == 1.0  # greedy
    explicit = TrainConfig.model_validate({"agent": {"temperature": 0.8}, "algorithm": {"temperature": 1.0}})
    assert explicit.algorithm.temperature == 1.0
