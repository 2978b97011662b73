"""examples/envqa/default-job.yaml: the default job's training tasks sampled the way `temper train` samples
them (its agent settings, one group per task), and the manifest keeping those in the learnable band."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
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


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_example_writes_a_manifest_of_the_learnable_band(tmp_path: Path) -> None:
    out = tmp_path / "band"
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-m", "temper", "envqa", "--config", str(EXAMPLE), "--limit", "20",
                        "--out", str(out)], capture_output=True, text=True, env=env, timeout=280)
    assert r.returncode == 0, r.stderr[-2000:]
    report = json.loads((out / "report.json").read_text())
    tasks = report["tasks"]
    assert len(tasks) == 20 and all(t["samples"] == 8 for t in tasks)
    band = [t["id"] for t in tasks if "ok" in t["verdicts"] and 1 <= t["passes"] <= 7]
    assert band and len(band) < 10  # the base model passes ~1 in 4 of these tasks at all: both kinds are there
    manifest = json.loads((out / "manifest.json").read_text())
    assert [t["id"] for t in manifest["tasks"]] == band  # a task passed 0 or 8 times taught GRPO nothing
    assert manifest["model"] == "smollm2-135m"
