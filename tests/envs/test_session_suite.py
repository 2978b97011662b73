"""The `session:` family: records one per message, then a question about them; recall scoring; oracle 1, no-op 0."""

import asyncio

import pytest

from temper.envs import parse_spec
from temper.errors import TemperError


def _play(suite, task, replies: list[str]) -> tuple[list[str], object]:
    """Reset, then step with each reply; the messages the agent saw and the last step's result."""

    async def go():
        env = suite.make_env(task)
        seen = [(await env.reset()).content]
        result = None
        for r in replies:
            result = await env.step(r)
            if result.observation is not None:
                seen.append(result.observation.content)
        return seen, result

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["recall", "track"])
def test_records_arrive_one_per_reply_then_the_question_is_scored(kind):
    suite = parse_spec(f"session:task={kind},turns=4,record=80,n=3,haystack=generated")
    task = suite.tasks()[1]
    records = task.payload["records"]
    assert len(records) == 4 and all(300 < len(r) < 500 for r in records)  # ~80 tokens of ~4 characters
    facts = [r for r in records if ("access code" in r if kind == "recall" else "VAR " in r)]
    assert len(facts) == 4  # a fact in every record
    seen, result = _play(suite, task, ["ready"] + ["noted"] * 4 + [f"<answer>{task.oracle}</answer>"])
    assert seen[0] == task.prompt and "A session of 4 records" in seen[0]  # the task: no record in it
    assert [s.splitlines()[0] for s in seen[1:5]] == [f"Record {i} of 4:" for i in range(1, 5)]
    assert seen[5].startswith("That was the last record.") and task.payload["question"] in seen[5]
    assert result.done and result.reward.value == 1.0
    _, wrong = _play(suite, task, ["ready"] + ["noted"] * 4 + ["<answer>12345</answer>"])
    assert wrong.done and wrong.reward.value == 0.0


def test_recall_asks_about_every_record_in_turn_and_track_scores_partial_chains():
    suite = parse_spec("session:task=recall,turns=3,record=40,n=6,haystack=generated")
    assert [t.payload["fact_in_record"] for t in suite.tasks()] == [1, 2, 3, 1, 2, 3]
    for t in suite.tasks()[:3]:  # the asked code is in the record the task says
        (code,) = t.payload["expected"]
        assert code in t.payload["records"][t.payload["fact_in_record"] - 1]
    track = parse_spec("session:task=track,turns=4,record=40,n=1,haystack=generated").tasks()[0]
    half = ", ".join(track.payload["expected"][:2])
    _, result = _play(parse_spec("session:task=track,turns=4,record=40,n=1,haystack=generated"), track,
                      ["ok"] * 5 + [f"<answer>{half}</answer>"])
    assert result.reward.value == 0.5


def test_oracle_and_noop_and_determinism():
    suite = parse_spec("session:turns=3,record=40,n=4,haystack=generated")
    assert [t.payload["kind"] for t in suite.tasks()] == ["recall", "track", "recall", "track"]
    assert asyncio.run(suite.run_oracles()) and all(r.value == 1.0 for r in asyncio.run(suite.run_oracles()))
    assert all(asyncio.run(suite.run_noop(t)).value == 0.0 for t in suite.tasks())
    again = parse_spec("session:turns=3,record=40,n=4,haystack=generated")
    assert [t.id for t in again.tasks()] == [t.id for t in suite.tasks()]
    other = parse_spec("session:turns=3,record=40,n=4,haystack=generated,seed=1")
    assert not {t.id for t in other.tasks()} & {t.id for t in suite.tasks()}


@pytest.mark.parametrize(("spec", "field"), [("session:task=chat", "task="), ("session:turns=1", "turns >= 2"),
                                             ("session:record=5", "record >= 20")])
def test_a_bad_spec_says_which_field(spec, field):
    with pytest.raises(TemperError, match=field):
        parse_spec(spec).tasks()
