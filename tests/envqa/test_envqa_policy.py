"""Policy pass rate through the agent loop on the warm pool: a scripted generation client (a double of
the engine's protocol) for exact figures, and the real SmolLM2 on a couple of tasks (slow)."""

import asyncio
import json
from pathlib import Path

import pytest
from envqa_plant import PASS_IF, task

from temper.agent import sample_seed
from temper.envqa import EnvQAConfig, run_envqa
from temper.envs import parse_spec
from temper.generation.completion import Completion
from temper.generation.sampling_params import SamplingParams

SOLVE = '<tool_call>{"name": "bash", "arguments": {"command": "echo ok > done.txt"}}</tool_call>'
SUBMIT = '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'


class SeedScriptedClient:
    """Solves (creates done.txt) in the episodes whose sampling seed is in `solving`, gives up in the
    others; then submits."""

    def __init__(self, tokenizer, solving: set[int]) -> None:
        self.tok, self.solving, self.turns = tokenizer, solving, {}

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        turn = self.turns[params.seed] = self.turns.get(params.seed, -1) + 1
        text = SOLVE if turn == 0 and params.seed in self.solving else SUBMIT
        ids = [*self.tok.encode(text), self.tok.token_to_id("<|im_end|>")]
        return Completion("r", 0, list(token_ids), ids, text, [-0.5] * len(ids), [], [0] * len(ids), "stop")


def policy_suite(root: Path) -> Path:
    task(root, "make-done", "Create the file /app/done.txt.", "echo ok > /app/done.txt\n",
         PASS_IF.format(cond="[ -f /app/done.txt ]"))
    task(root, "answer-42", "Write the answer, 42, to /app/answer.txt.", "echo 42 > /app/answer.txt\n",
         PASS_IF.format(cond='[ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]'))
    return root


def test_pass_rates_strata_sparsity_and_manifest(tmp_path: Path, smollm2_tokenizer) -> None:
    root = policy_suite(tmp_path / "tasks")
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={root}", samples=8, oracle_runs=1,
        out=str(tmp_path / "qa")))
    done_id = next(t.id for t in parse_spec(cfg.suite).tasks() if t.payload["name"] == "make-done")
    solved = 3  # samples 0, 1 and 2 of make-done solve it: a pass rate of 3/8
    client = SeedScriptedClient(smollm2_tokenizer, {sample_seed(cfg.seed, done_id, i) for i in range(solved)})
    report = asyncio.run(run_envqa(cfg, client=client, tokenizer=smollm2_tokenizer))
    by = {Path(t["path"]).name: t for t in report["tasks"]}
    assert by["make-done"]["pass_rate"] == solved / 8 and by["make-done"]["passes"] == solved
    assert by["make-done"]["verdicts"] == ["ok", "learnable"]
    assert by["make-done"]["ci"][0] <= solved / 8 <= by["make-done"]["ci"][1]
    assert by["answer-42"]["verdicts"] == ["ok", "too-hard"] and by["answer-42"]["zero_variance"] is True
    assert report["summary"]["reward_sparsity"] == 0.5  # one of the two groups has no reward variance
    manifest = json.loads((tmp_path / "qa" / "manifest.json").read_text())
    assert [(t["id"], t["pass_rate"]) for t in manifest["tasks"]] == [(done_id, solved / 8)]
    suite = parse_spec(f"manifest:path={tmp_path / 'qa'}")
    assert [t.id for t in suite.tasks()] == [done_id] and suite.pass_rates() == {done_id: (solved, 8)}
    assert (tmp_path / "qa" / "pass_rates.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.e2e
def test_real_smollm2_pass_rate(tmp_path: Path, smollm2) -> None:
    root = policy_suite(tmp_path / "tasks")
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={root}", samples=2, oracle_runs=1,
                      agent={"max_turns": 2, "max_turn_tokens": 48}, out=str(tmp_path / "qa")))
    from temper.engine import AsyncEngine, LLMEngine

    engine = AsyncEngine(LLMEngine(smollm2.model, smollm2.tokenizer))
    try:
        report = asyncio.run(run_envqa(cfg, client=engine, tokenizer=smollm2.tokenizer))
    finally:
        engine.close()
    for t in report["tasks"]:
        policy = json.loads((tmp_path / "qa" / t["file"]).read_text())["checks"]["policy"]
        assert policy["samples"] + policy["failures"] == 2 and len(policy["answers"]) == 2
        assert t["verdicts"][0] == "ok" and t["verdicts"][1] in ("too-easy", "learnable", "too-hard")
