"""reasoning-gym adapters, scored by the package's own score_answer."""

import asyncio

import pytest

from temper.envs.registry import parse_spec

TASKS = ["countdown", "basic_arithmetic", "gsm_symbolic", "chain_sum", "needle_haystack"]


@pytest.mark.parametrize("name", TASKS)
def test_oracle_scores_one_and_wrong_answers_do_not(name: str) -> None:
    suite = parse_spec(f"reasoning_gym:task={name},n=4,seed=1")
    tasks = suite.tasks()
    assert len(tasks) == 4 and len({t.id for t in tasks}) == 4
    assert all(t.tags == ("reasoning_gym", name) and "<answer>" in t.prompt for t in tasks)
    for t in tasks:
        assert asyncio.run(suite.run_oracle(t)).value == 1.0
        env = suite.make_env(t)
        wrong = asyncio.run(env.step("<answer>definitely not it 0</answer>")).reward
        assert wrong.value < 1.0 and wrong.components["format"] == 1.0
        rambling = f"Let me think.\nI believe it is {t.oracle}\nor maybe not."
        assert asyncio.run(env.step(rambling)).reward.components["format"] == 0.0  # no committed answer
        assert env.validate(rambling) is not None and env.validate(f"<answer>{t.oracle}</answer>") is None
        assert asyncio.run(env.step(t.oracle)).reward.value == 1.0  # a bare answer, as the submit tool gives


def test_same_seed_same_tasks_other_seed_other_tasks() -> None:
    a = [t.id for t in parse_spec("reasoning_gym:task=chain_sum,n=5,seed=3")]
    assert a == [t.id for t in parse_spec("reasoning_gym:task=chain_sum,n=5,seed=3")]
    assert a != [t.id for t in parse_spec("reasoning_gym:task=chain_sum,n=5,seed=4")]


def test_python_tool_option_declares_the_tool() -> None:
    suite = parse_spec("reasoning_gym:task=basic_arithmetic,n=1,python=true")
    assert suite.needs_sandbox and "python" in suite.make_env(suite.tasks()[0]).tools
