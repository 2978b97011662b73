"""The model solver (engine + agent loop) on a tiny random model: per-item tokens, latency and time
to first token; the long-context grid, heatmap and latency/cost curves through `temper eval --grid`;
the effective length and depth profile on planted answers; one-line errors for bad input."""

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from temper.cli.main import app
from temper.evals.config import EvalConfig
from temper.evals.harness import evaluate
from temper.evals.longctx_grid import effective_length
from temper.evals.model_solver import ModelSolver
from temper.evals.solvers import AnswerSolver

LONGCTX = "longctx:task=niah,length=100,n=3,haystack=generated"


@pytest.fixture
def tiny(tiny_llama):
    return tiny_llama(max_position_embeddings=2048)


def test_model_items_carry_tokens_latency_and_ttft(tmp_path: Path, tiny, smollm2_tokenizer) -> None:
    cfg = EvalConfig.from_recipe(dict(progress=False, samples=2))
    cfg.agent.max_turn_tokens = 12
    solver = ModelSolver.from_model(tiny, smollm2_tokenizer, cfg, "tiny")
    try:
        run = asyncio.run(evaluate(solver, [LONGCTX], cfg, tmp_path))
    finally:
        solver.close()
    records = run.records[LONGCTX]
    assert len(records) == 6 and {r.sample for r in records} == {0, 1}
    for r in records:
        assert r.ok and r.turns == 1 and 100 < r.tokens_in < 400 and 1 <= r.tokens_out <= 12
        assert r.latency_s > 0 and 0 < r.ttft_s < r.latency_s and r.peak_mem_mb > 0
        assert r.cost == pytest.approx((r.tokens_in * 0.10 + r.tokens_out * 0.40) / 1e6)
        assert r.prompt.startswith(r.prompt[:20]) and "magic number" in r.prompt
    s = run.summary["suites"][LONGCTX]
    assert s["n"] == 3 and s["pass@1"] is not None and s["pass@2"] is not None and s["usage"]["ttft_s_mean"] > 0
    assert run.summary["run"]["model"] == "tiny" and run.summary["run"]["temperature"] == 0.8
    lines = (tmp_path / "suites" / "longctx_task_niah_length_100_n_3_haystack_generated" / "items.jsonl")
    assert len(lines.read_text().splitlines()) == 6


def test_grid_heatmap_and_curves_through_the_cli(tmp_path: Path, tiny, smollm2_tokenizer) -> None:
    from temper.models import save_model

    model_dir = save_model(tiny, smollm2_tokenizer, tmp_path / "tiny")
    out = tmp_path / "run"
    result = CliRunner().invoke(app, [
        "eval", "--model", str(model_dir), "--grid", "--out", str(out), "--set", "progress=false",
        "--set", "grid.lengths=[64,256,1024]", "--set", "grid.depths=[0,0.5,1]", "--set", "grid.n=2",
        "--set", "grid.tasks=[niah,vartrack]", "--set", "grid.haystack=generated", "--set", "agent.max_turn_tokens=8",
    ])
    assert result.exit_code == 0, (result.output, result.exception)
    s = json.loads((out / "summary.json").read_text())
    g = s["longctx_grid"]
    assert g["lengths"] == [64, 256, 1024] and len(g["accuracy"]) == 3 and all(len(r) == 3 for r in g["accuracy"])
    assert set(g["depth_profile"]) == {"0", "0.5", "1"} and g["infra_failures"] == 0
    pts = s["curves"]["points"]
    assert [p["length"] for p in pts] == [64, 256, 1024] and all(p["items"] == 6 for p in pts)
    tokens = [p["prompt_tokens"] for p in pts]
    assert tokens == sorted(tokens) and tokens[-1] > 900
    assert all(p["ttft_s"] > 0 and p["tpot_s"] > 0 and p["peak_mem_mb"] > 0 and p["cost_per_item"] > 0 for p in pts)
    kv = [p["kv_cache_mb"] for p in pts]
    assert kv == sorted(kv) and kv[0] > 0
    assert json.loads((out / "curves.json").read_text()) == s["curves"]
    assert json.loads((out / "longctx_grid.json").read_text()) == g
    for png in ("longctx_heatmap.png", "longctx_profile.png", "curves.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.md").read_text()
    assert "Effective context length" in report and "![accuracy per length and depth](longctx_heatmap.png)" in report
    assert "longctx grid: effective length" in result.stdout


def test_effective_length_and_depth_profile_on_planted_answers(tmp_path: Path) -> None:
    def answer(task, sample):  # right up to 256 tokens, and at depth 0 at any length
        length = int(next(t for t in task.tags if t.startswith("len"))[3:])
        right = length <= 256 or "depth0" in task.tags
        return f"<answer>{task.oracle if right else 'lost'}</answer>"

    cfg = EvalConfig.from_recipe(dict(progress=False))
    cfg.grid.lengths, cfg.grid.depths, cfg.grid.n = [64, 256, 1024, 2048], [0.0, 0.5, 1.0], 4
    cfg.grid.haystack = "generated"
    run = asyncio.run(evaluate(AnswerSolver(answer), [], cfg, tmp_path, grid=True))
    g = run.summary["longctx_grid"]
    assert g["by_length"] == {"64": 1.0, "256": 1.0, "1024": pytest.approx(1 / 3), "2048": pytest.approx(1 / 3)}
    assert g["effective_length"] == 256 and g["base_score"] == 1.0
    assert g["effective_length_ruler"] == 256 and g["ruler_threshold"] == 0.856
    assert g["items_per_cell"] == [[4] * 3] * 4 and g["accuracy_ci"][0][0] == [1.0, 1.0]
    low, high = g["by_length_ci"]["1024"]
    assert low < 1 / 3 < high  # 12 items: a third right
    assert g["depth_profile_kinds"] == ["niah", "vartrack"]
    assert g["depth_profile"] == {"0": 1.0, "0.5": 0.5, "1": 0.5}
    assert g["accuracy"][2] == [1.0, 0.0, 0.0]


def test_effective_length_rule() -> None:
    assert effective_length({1000: 0.8, 2000: 0.7, 4000: 0.6, 8000: 0.7}, 0.85) == 2000  # 0.6 < 0.68 ends it
    assert effective_length({1000: 0.8, 2000: 0.8}, 0.85) == 2000
    assert effective_length({1000: 0.0, 2000: 0.0}, 0.85) is None
    # RULER's absolute bar: a model that is weak everywhere has no effective length, however flat its curve
    assert effective_length({1000: 0.8, 2000: 0.8}, 0.856, absolute=True) is None
    assert effective_length({1000: 0.95, 2000: 0.9, 4000: 0.7, 8000: 0.9}, 0.856, absolute=True) == 2000


@pytest.mark.parametrize("args,expected", [
    (["eval", "--oracle", "--suite", "nosuch"], "unknown suite 'nosuch'"),
    (["eval", "--oracle", "--suite", "longctx:depth=2"], "need 0 <= depth <= 1"),
    (["eval", "--oracle"], "nothing to evaluate"),
])
def test_bad_eval_input_fails_with_one_line(args: list[str], expected: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code != 0 and expected in str(result.exception)
    assert not (tmp_path / "summary.json").exists()
