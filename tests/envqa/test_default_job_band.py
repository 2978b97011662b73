"""examples/envqa/default-job.yaml samples the default job's training tasks the way `temper train` samples them
(its agent settings, one group per task). docs/envqa.md runs it and checks its manifest keeps the learnable
band (tests/envqa/test_envqa_docs.py)."""

from pathlib import Path

import yaml

from temper.config import load_config, read_recipe
from temper.envqa import EnvQAConfig
from temper.orchestrator.train import resolve_train_config

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "envqa" / "default-job.yaml"
SAMPLING_ONLY = {"turn_timeout_s", "episode_timeout_s"}  # the train recipe's agent fields that do not shape a sample


def test_the_example_samples_like_the_default_train_recipe() -> None:
    qa, example = load_config(EnvQAConfig, EXAMPLE), yaml.safe_load(EXAMPLE.read_text())
    train = resolve_train_config(None, [], {}, None, create=False)[0]
    assert set(read_recipe("train")["agent"]) - SAMPLING_ONLY <= set(example["agent"])
    for key in example["agent"]:
        assert getattr(qa.agent, key) == getattr(train.agent, key), key
    assert qa.agent.top_p == train.agent.top_p
    assert qa.suite == train.suites[0].spec and qa.against == [train.eval.suite]
    assert qa.samples == train.orchestrator.group_size
