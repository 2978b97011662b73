"""benchmarks/main_job_bench.py's comparison logic at a tiny size: the prompt ids temper's agent loop trains on
equal the ids of the chat template TRL applies (and a changed or missing prompt is caught), the reward rule TRL's
side scores with equals temper's verifier on sample replies (and a different rule is caught), and the held-out
ids must be the same on every side."""

import asyncio
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import main_job_bench as bench  # noqa: E402
import trl_grpo_side as trl_side  # noqa: E402

SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
REPLIES = ["34 + 44 = 78", "78", "The answer is 78.", "34+44=78, so 78", "= -5", "7 8", "1,078", "no idea",
           "34 + 44 = 78 = 79", "", "78.0", "=78 then 12", "3+4=7\n\n78"]


@pytest.fixture(scope="module")
def suite():
    from temper.envs import parse_spec

    return parse_spec("arithmetic:op=add,digits=2,n=6,seed=1")


def test_the_prompt_ids_temper_trains_on_are_the_chat_template_trl_applies(suite, smollm2_path, smollm2_tokenizer,
                                                                           tiny_engine):
    from transformers import AutoTokenizer

    from temper.agent.config import AgentConfig
    from temper.episode_runner import run_episode

    agent = AgentConfig(system_prompt=SYSTEM, max_turns=1, max_turn_tokens=4, max_answer_retries=0)
    tasks = suite.tasks()[:3]
    temper_ids = []
    for task in tasks:  # the ids a trajectory starts with: what the trainer trains the reply on
        (traj,) = asyncio.run(run_episode(tiny_engine, smollm2_tokenizer, suite, task, None, agent, 0)).trajectories
        temper_ids.append(traj.token_ids[:traj.loss_mask.index(1)])
    hf = AutoTokenizer.from_pretrained(smollm2_path)
    trl_ids = [hf.apply_chat_template([{"role": "system", "content": SYSTEM}, {"role": "user", "content": t.prompt}],
                                      add_generation_prompt=True, tokenize=True, return_dict=False) for t in tasks]
    assert bench.prompt_mismatches(temper_ids, trl_ids) == []
    changed = [ids[:] for ids in trl_ids]
    changed[1][-3] += 1
    assert bench.prompt_mismatches(temper_ids, changed) == [1]
    assert bench.prompt_mismatches(temper_ids, trl_ids[:2]) == [2]


def test_the_reward_trls_side_scores_with_is_temper_verifiers(suite):
    tasks = {t.id: t for t in suite.tasks()}
    score = bench.temper_score(suite, tasks)
    answer = str(next(iter(tasks.values())).payload["answer"])
    replies = [r.replace("78", answer) for r in REPLIES]
    scored = [{"text": r, "answer": answer, "reward": float(trl_side.lenient_number(r) == answer)} for r in replies]
    assert {c["reward"] for c in scored} == {0.0, 1.0}  # the samples have both outcomes
    assert bench.reward_mismatches(scored, score) == []
    first_number = [{**c, "reward": float(answer in c["text"].split()[:1])} for c in scored]  # another rule
    assert bench.reward_mismatches(first_number, score)


def test_every_side_must_have_scored_the_same_heldout_tasks():
    same = {"before": {"a": 1.0, "b": 0.0}, "trl": {"b": 1.0, "a": None}}
    assert bench.heldout_ids(same) == ["a", "b"]
    with pytest.raises(SystemExit, match=r"differ between before and \['temper_s1'\]"):
        bench.heldout_ids({**same, "temper_s1": {"a": 1.0}})


def test_the_heldout_limit_counts_distinct_tasks():
    assert bench.first_distinct(["a", "b", "a", "c", "d"], 3) == 4
    assert bench.first_distinct(["a", "a"], 3) == 2


def test_several_seeds_pool_their_gains_over_every_seed_and_task():
    def run(train_s: float) -> dict:
        return {"train_s": train_s, "samples_generated": 100, "samples_trained": 64, "rollout_wait_s": 1.0,
                "trainer_s": 2.0, "push_s": 0.5, "checkpoint_s": 0.5}

    tasks = [f"t{i}" for i in range(40)]
    before = {t: float(i % 2) for i, t in enumerate(tasks)}
    per_seed = []
    for seed, (temper_up, trl_up, minutes) in enumerate([(10, 4, 5.0), (20, 8, 7.0)]):
        # each side solves `up` of the tasks the base model failed: gain = up / 40
        failed = [t for t in tasks if before[t] == 0]
        up = {name: {t: 1.0 if (before[t] or t in failed[:n]) else 0.0 for t in tasks}
              for name, n in (("temper_s1", temper_up), ("trl", trl_up))}
        evals = {"before": before, **up}
        runs = {1: {**run(minutes * 60), "staleness": 1}}
        trl = {**run(2 * minutes * 60), "completions": [{}] * 512, "versions": {"trl": "1.16.0"}, "prompt_ids": []}
        per_seed.append({"seed": seed, "evals": evals, "temper_runs": runs, "trl": trl,
                         "summary": bench.summarize(evals, runs, trl, {}, 40, 512)})
    out = bench.pooled(per_seed, {})
    assert out["settings"]["seeds"] == [0, 1] and len(out["per_seed"]) == 2
    assert out["trl"]["paired_n"] == out["temper_s1"]["paired_n"] == 80 and out["heldout_n"] == 40
    assert out["temper_s1"]["gain"] == pytest.approx((10 + 20) / 80, abs=1e-3)  # the mean of the seeds' gains
    assert out["temper_s1"]["train_min"] == 6.0 and out["trl"]["train_min"] == 12.0  # minutes averaged
    # temper gains 2.5x TRL's in half the minutes: 5x TRL's gain per minute, pooled as in each seed
    assert out["gain_per_min_ratio_s1"] == pytest.approx(5.0, rel=0.01)
    assert [s["gain_per_min_ratio_s1"] for s in out["per_seed"]] == pytest.approx([5.0, 5.0], rel=0.01)
