"""`temper train` with an external agent: two GRPO steps on a terminal task whose program (the
official openai client) acts on what the policy says; the recorded tokens train the model."""

import json
from pathlib import Path

import pytest
from external_helpers import task_folder
from safetensors.torch import load_file

pytestmark = pytest.mark.e2e

AGENT = """
import os, httpx, openai
client = openai.OpenAI(max_retries=0)
reply = client.chat.completions.create(model="policy", messages=[
    {"role": "system", "content": "say"}, {"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}])
text = reply.choices[0].message.content or ""
word = "ok" if len(text) % 2 == 0 else "no"  # the policy's answer decides what the program does
httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": f"echo {word} > /app/done.txt"},
           headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}).raise_for_status()
print(text)
"""


@pytest.fixture(scope="module")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from temper.models.toy import make_toy_model

    return make_toy_model(tmp_path_factory.mktemp("toy") / "model")


@pytest.mark.slow
def test_two_training_steps_on_an_external_agent_change_the_weights(toy_model, tmp_path, program):
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    tasks = task_folder(tmp_path / "tasks")
    argv = program(AGENT)
    cfg = TrainConfig.from_recipe({
        "model": str(toy_model), "suites": [{"spec": f"terminal:path={tasks}"}],
        "algorithm": {"optim": {"lr": 0.05, "total_steps": 100, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 16_000_000, "max_num_seqs": 16},
        "agent": {"kind": "external", "command": argv, "max_turn_tokens": 3},
        "orchestrator": {"group_size": 8, "batch_groups": 1, "max_staleness": 0, "concurrency": 4},
        "eval": {"suite": None}, "max_steps": 2, "out": str(tmp_path / "run"),
        "logging": {"progress": False, "plots": False}})
    train(cfg, RunDir.create(cfg))
    last = sorted((tmp_path / "run" / "checkpoints").glob("step_*"))[-1]
    before = load_file(next(toy_model.glob("*.safetensors")))
    after = load_file(next((last / "model").glob("*.safetensors")))
    changed = [k for k in before if k in after and not before[k].equal(after[k])]
    assert changed, "two steps on the recorded tokens changed no weight"
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines() if line]
    assert len(rows) == 2 and all(r.get("failures", 0) == 0 for r in rows)
