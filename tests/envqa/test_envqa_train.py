"""Training uses envqa: `temper train` takes the filtered manifest as its task source, and the pass
rates envqa measured seed the curriculum's difficulty pools."""

import asyncio
import json
import re

import pytest

from temper.agent import sample_seed
from temper.envqa import EnvQAConfig, run_envqa
from temper.envs import parse_spec
from temper.generation.completion import Completion
from temper.generation.sampling_params import SamplingParams

pytestmark = pytest.mark.e2e

SPEC = "toy:n=6,seed=0,digits=10"


class ToyScriptedClient:
    """Says the digit asked for in the episodes whose seed is in `solving`, a wrong word otherwise."""

    def __init__(self, tokenizer, solving: set[int]) -> None:
        self.tok, self.solving = tokenizer, solving

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        digit = re.findall(r"say (\d)", self.tok.decode(token_ids))[-1]
        text = digit if params.seed in self.solving else "say"
        ids = [*self.tok.encode(text), self.tok.eos_token_id]
        return Completion("r", 0, list(token_ids), ids, text, [-0.5] * len(ids), [], [0] * len(ids), "stop")


@pytest.fixture(scope="module")
def qa(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from temper.models.toy import make_toy_model, toy_tokenizer

    tmp = tmp_path_factory.mktemp("envqa-train")
    tok = toy_tokenizer()
    ids = [t.id for t in parse_spec(SPEC).tasks()]
    solving = {sample_seed(0, i, s) for i in ids for s in range(3)}  # 3 of 8 samples solve each task
    cfg = EnvQAConfig.from_recipe(dict(suite=SPEC, samples=8, out=str(tmp / "qa")))
    report = asyncio.run(run_envqa(cfg, client=ToyScriptedClient(tok, solving), tokenizer=tok))
    return {"report": report, "out": tmp / "qa", "model": make_toy_model(tmp / "model"), "tmp": tmp}


def test_manifest_keeps_learnable_deduplicated_tasks_with_pass_rates(qa: dict) -> None:
    tasks = qa["report"]["tasks"]
    assert all(t["pass_rate"] == 3 / 8 for t in tasks if "duplicate" not in t["verdicts"])
    manifest = json.loads((qa["out"] / "manifest.json").read_text())
    kept = [t for t in tasks if t["verdicts"] == ["ok", "learnable"]]
    assert [t["id"] for t in manifest["tasks"]] == [t["id"] for t in kept] and kept
    assert len({t.prompt for t in parse_spec(SPEC).tasks()}) == len(kept)  # one task per distinct prompt


def test_curriculum_pools_are_seeded_from_pass_rates(qa: dict) -> None:
    from temper.orchestrator.config import CurriculumConfig, SuiteConfig
    from temper.orchestrator.scheduler import TaskScheduler

    spec = f"manifest:path={qa['out'] / 'manifest.json'}"
    suite = parse_spec(spec)
    sched = TaskScheduler.build([(SuiteConfig(spec=spec), suite)], CurriculumConfig())
    n = len(suite.tasks())
    assert sched.pools()["medium"] == n and sched.pools()["new"] == 0  # 3/8 is between hard_below and easy_above
    assert all(sched.stats[t.id].pass_rate == 3 / 8 for t in suite.tasks())


def test_train_takes_the_manifest_as_task_source(qa: dict) -> None:
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    out = qa["tmp"] / "train"
    cfg = TrainConfig.from_recipe({
        "model": str(qa["model"]), "suites": [{"spec": f"manifest:path={qa['out']}"}],
        "algorithm": {"optim": {"lr": 0.03, "total_steps": 100, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "engine": {"kv_budget_bytes": 16_000_000, "max_num_seqs": 32},
        "agent": {"max_turn_tokens": 1, "system_prompt": "say"},
        "orchestrator": {"group_size": 4, "batch_groups": 2, "max_staleness": 1, "concurrency": 8},
        "eval": {"suite": None}, "max_steps": 2, "out": str(out), "logging": {"progress": False, "plots": False},
    })
    train(cfg, RunDir.create(cfg))
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "step" in r][-1] == 2
