"""Long-context tasks: needles at the set depth, multi-hop chains, aggregation; oracle 1, no-op 0."""

import asyncio

import pytest

from temper.envs.haystack import essays
from temper.envs.registry import parse_spec


@pytest.mark.parametrize("kind", ["niah", "multi_niah", "vartrack", "freq"])
@pytest.mark.parametrize("haystack", ["essays", "generated"])
def test_each_kind_scores_its_oracle_and_not_a_noop(kind: str, haystack: str, smollm2_tokenizer) -> None:
    suite = parse_spec(f"longctx:task={kind},length=1500,n=3,haystack={haystack}")
    for t in suite:
        # `length` is tokens of the policy's tokenizer, within 25% (freq once sized by characters: 2x, and its
        # 4096-token items overflowed an 8K context)
        assert t.payload["kind"] == kind and abs(len(smollm2_tokenizer.encode(t.prompt)) - 1500) < 375
        assert asyncio.run(suite.run_oracle(t)).value == 1.0
        assert asyncio.run(suite.run_noop(t)).value == 0.0


def test_needle_sits_at_the_requested_depth_in_real_prose() -> None:
    for depth in (0.0, 0.5, 1.0):
        t = parse_spec(f"longctx:task=niah,length=4000,depth={depth},n=1").tasks()[0]
        pos = t.prompt.index("The special magic number") / t.prompt.index("What is the special")
        assert abs(pos - depth) < 0.05
        middle = t.prompt[len(t.prompt) // 3:][:400].split(". ")[1]
        assert middle in essays()  # real essay text


def test_length_is_configurable_and_partial_answers_get_partial_recall() -> None:
    short, long_ = (parse_spec(f"longctx:task=multi_niah,length={n},n=1").tasks()[0] for n in (500, 8000))
    assert len(long_.prompt) > 10 * len(short.prompt)
    suite = parse_spec("longctx:task=multi_niah,length=500,n=1,needles=4")
    env = suite.make_env(suite.tasks()[0])
    half = ", ".join(suite.tasks()[0].payload["expected"][:2])
    assert asyncio.run(env.step(f"<answer>{half}</answer>")).reward.value == 0.5
