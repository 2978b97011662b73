"""Remote rollouts: `temper train` on the tiny recipe generating on a local `temper serve` (weights
pushed through /v1/load_weights after every step, with the server's operator token) learns like the
in-process engine does, and
`temper eval --endpoint URL` evaluates the model behind a server."""

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from serve_helpers import LiveServer, metric, serve_config
from typer.testing import CliRunner

from temper.cli.main import app

pytestmark = pytest.mark.e2e

LONGCTX = "longctx:task=niah,length=100,n=3,haystack=generated"


def tiny_recipe(model: Path, out: Path, url: str) -> dict[str, Any]:
    """The orchestrator tests' tiny recipe (toy model learns 'say 7' -> '7'), on the remote backend."""
    return {
        "model": str(model),
        "suites": [{"spec": "toy:n=64,seed=0,digits=2"}],
        "algorithm": {"optim": {"lr": 0.03, "total_steps": 1000, "min_lr_ratio": 1.0},
                      "checkpoint": {"keep_last": 2, "keep_best": False}},
        "agent": {"max_turn_tokens": 1, "system_prompt": "say"},
        "orchestrator": {"group_size": 8, "batch_groups": 4, "max_staleness": 1, "concurrency": 32,
                         "backend": "remote", "remote": {"url": url, "model": "tiny",
                                                          "weights_dir": str(out.parent / "push"),
                                                          "admin_token_file": str(out.parent / "admin-token")}},
        "eval": {"suite": "toy:n=64,seed=99,digits=2", "n": 64},
        "max_steps": 30,
        "out": str(out),
        "logging": {"progress": False, "plots": False},
    }


@pytest.mark.slow
def test_train_tiny_recipe_on_a_remote_server(tmp_path: Path):
    from temper.models.toy import make_toy_model
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    model = make_toy_model(tmp_path / "toy")
    with LiveServer(serve_config(model, tmp_path, weights_dirs=[tmp_path / "push"],
                                 **{"engine.kv_budget_bytes": 16_000_000})) as srv:
        cfg = TrainConfig.from_recipe(tiny_recipe(model, tmp_path / "run", srv.url))
        summary = train(cfg, RunDir.create(cfg))
        text = httpx.get(f"{srv.url}/metrics").text
    # The same bar as the in-process tiny recipe (tests/orchestrator/test_orch_pipeline.py).
    assert summary["after"]["mean_reward"] > summary["before"]["mean_reward"] + 0.3, summary
    assert summary["difference"]["change"] == "improved", summary
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 30
    trained = sum(not r.get("skipped") for r in rows)  # steps that changed the weights (and pushed them)
    assert metric(text, "temper_engine_policy_version") >= min(trained, 5) > 0
    assert metric(text, "temper_serve_requests_total", variant="standard", endpoint="completion", status="ok") > 500


@pytest.mark.slow
def test_train_on_a_remote_server_with_a_sandboxed_suite(tmp_path: Path):
    """The remote backend's sandbox pool has the mounts episodes need (a bare SandboxPool stopped the
    run with 'sandbox pool: its config lacks the mounts'): two steps on the toy suite whose verifier
    runs in a sandbox, every episode scored there."""
    from temper.models.toy import make_toy_model
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.run_dir import RunDir
    from temper.orchestrator.train import train

    model = make_toy_model(tmp_path / "toy")
    with LiveServer(serve_config(model, tmp_path, weights_dirs=[tmp_path / "push"],
                                 **{"engine.kv_budget_bytes": 16_000_000})) as srv:
        recipe = tiny_recipe(model, tmp_path / "run", srv.url)
        recipe.update(suites=[{"spec": "toy:n=16,seed=0,digits=2,sandbox=true"}], eval={"suite": None}, max_steps=2)
        recipe["orchestrator"].update(group_size=4, batch_groups=2, concurrency=8)
        cfg = TrainConfig.from_recipe(recipe)
        train(cfg, RunDir.create(cfg))
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["failures"] == 0 for r in rows), rows
    audit = [json.loads(x) for x in (tmp_path / "run" / "sandbox" / "sandbox-audit.jsonl").read_text().splitlines()]
    assert any("python3" in json.dumps(r) for r in audit)  # verifiers ran in the pool's sandboxes


def test_eval_endpoint_evaluates_a_served_model(live, tiny_model_dir, tmp_path: Path):
    out = tmp_path / "eval"
    result = CliRunner().invoke(app, [
        "eval", "--endpoint", live.url, "--model", str(tiny_model_dir), "--set", "endpoint_model=tiny",
        "--suite", LONGCTX, "--out", str(out), "--set", "progress=false", "--set", "agent.max_turn_tokens=8"])
    assert result.exit_code == 0, (result.output, result.exception)
    s = json.loads((out / "summary.json").read_text())
    assert s["suites"][LONGCTX]["n"] == 3 and s["run"]["model"] == f"tiny @ {live.url}"
    items = [json.loads(x) for x in next(out.glob("suites/*/items.jsonl")).read_text().splitlines()]
    assert len(items) == 3 and all(1 <= r["tokens_out"] <= 8 for r in items)
    records = [json.loads(x) for x in (live.tmp / "usage.jsonl").read_text().splitlines()]
    assert sum(r["endpoint"] == "completion" and r["prompt_tokens"] > 100 for r in records) >= 3  # served there
