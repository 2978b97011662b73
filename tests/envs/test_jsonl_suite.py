"""A user's JSONL dataset with a reward function named by import path."""

import asyncio
import json

import pytest

from temper.envs.registry import parse_spec
from temper.errors import TemperError

REWARD_MODULE = '''
def exact(completion, example):
    return {"correctness": float(completion.strip() == example["answer"]), "format": 1.0}

async def async_len(completion, example):
    return len(completion) <= example.get("max_len", 10)
'''


@pytest.fixture
def dataset(tmp_path, monkeypatch):
    (tmp_path / "user_rewards.py").write_text(REWARD_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "data.jsonl"
    rows = [{"prompt": "2+2?", "answer": "4", "tags": ["math"], "difficulty": "easy"},
            {"prompt": "Capital of France?", "answer": "Paris", "domain": "geo"}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    return path


def test_jsonl_tasks_rewards_and_oracle(dataset) -> None:
    suite = parse_spec(f"jsonl:path={dataset},reward=user_rewards:exact")
    tasks = suite.tasks()
    assert [t.domain for t in tasks] == ["custom", "geo"]
    assert tasks[0].tags == ("math",) and tasks[0].difficulty == "easy"
    # stable content ids: a second load gives the same ids
    assert [t.id for t in tasks] == [t.id for t in parse_spec(f"jsonl:path={dataset},reward=user_rewards:exact")]
    oracle = asyncio.run(suite.run_oracle(tasks[1]))
    assert oracle.value == 1.0 and oracle.components == {"correctness": 1.0, "format": 1.0}
    assert asyncio.run(suite.run_noop(tasks[1])).value == 0.5  # mean of components: format only


def test_async_reward_function(dataset) -> None:
    suite = parse_spec(f"jsonl:path={dataset},reward=user_rewards:async_len")
    env = suite.make_env(suite.tasks()[0])
    assert asyncio.run(env.step("short")).reward.value == 1.0
    assert asyncio.run(env.step("much too long an answer")).reward.value == 0.0


def test_jsonl_errors_name_the_line(tmp_path, dataset) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"no_prompt": 1}\n')
    with pytest.raises(TemperError, match=r"bad.jsonl:2: each line must be an object with a string 'prompt'"):
        parse_spec(f"jsonl:path={bad},reward=user_rewards:exact").tasks()
    with pytest.raises(TemperError, match="has no attribute nope"):
        parse_spec(f"jsonl:path={dataset},reward=user_rewards:nope")
