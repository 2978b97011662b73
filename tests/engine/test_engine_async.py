"""The asyncio interface and the RL hooks: concurrent multi-turn conversations, streaming,
abort with partial tokens, in-place weight updates with policy versions per token."""

import asyncio

import pytest
import torch
from engine_helpers import random_prompts, reference_greedy, tiny_pair

from temper.engine import AsyncEngine, EngineConfig, LLMEngine
from temper.generation import Completion, GenerationClient, RequestError, SamplingParams, TokenEvent


@pytest.fixture(scope="module")
def model():
    return tiny_pair(seed=0)[0]


def test_many_concurrent_multi_turn_conversations(model):
    engine = AsyncEngine(LLMEngine(model, None, EngineConfig(block_size=16)))
    assert isinstance(engine, GenerationClient)
    params = SamplingParams(temperature=0, max_tokens=6)

    async def conversation(i: int) -> list[int]:
        ids = random_prompts([20 + i], 512, seed=i)[0]
        for turn in range(3):
            c = await engine.generate(ids, params)
            assert c.finish_reason == "length" and c.versions == [0] * 6
            ids = ids + c.token_ids + [turn + 1, turn + 2, 7]  # an "observation" appended in token space
        return ids

    async def main():
        return await asyncio.gather(*(conversation(i) for i in range(12)))

    try:
        results = asyncio.run(main())
    finally:
        engine.close()
    assert engine.engine.blocks.hit_tokens > 0  # later turns reuse earlier turns' blocks
    for i, ids in enumerate(results):  # same tokens as plain sequential greedy decoding
        prompt = random_prompts([20 + i], 512, seed=i)[0]
        first, _ = reference_greedy(model, prompt, 6)
        assert ids[len(prompt):len(prompt) + 6] == first


def test_streaming_and_abort_return_partial_tokens(model):
    llm = LLMEngine(model, None, EngineConfig(block_size=16))
    engine = AsyncEngine(llm)
    prompt = random_prompts([10], 512, seed=1)[0]

    async def main():
        events: list[TokenEvent] = []
        final: list[Completion] = []
        async for item in engine.stream(prompt, SamplingParams(temperature=1.0, seed=3, max_tokens=500),
                                        request_id="long"):
            if isinstance(item, TokenEvent):
                events.append(item)
                if len(events) == 5:
                    await engine.abort("long")
            else:
                final.append(item)
        return events, final

    try:
        events, final = asyncio.run(main())
    finally:
        engine.close()
    (c,) = final
    assert c.finish_reason == "abort" and 5 <= len(c.token_ids) < 500
    assert [e.token_id for e in events] == c.token_ids
    assert [e.logprob for e in events] == c.logprobs
    assert not llm.has_unfinished() and llm.blocks.num_free == llm.blocks.num_blocks


def test_bad_request_raises_for_its_caller_only(model):
    engine = AsyncEngine(LLMEngine(model, None, EngineConfig(block_size=16)))

    async def main():
        good = engine.generate([1, 2, 3], SamplingParams(temperature=0, max_tokens=4))
        bad = engine.generate([1, 2, 3], SamplingParams(top_k=-1))
        return await asyncio.gather(good, bad, return_exceptions=True)

    try:
        good, bad = asyncio.run(main())
    finally:
        engine.close()
    assert len(good.token_ids) == 4
    assert isinstance(bad, RequestError) and "top_k" in str(bad)


def test_load_weights_in_place_invalidates_cache_and_tags_versions(model):
    import copy

    policy = copy.deepcopy(model)
    engine = LLMEngine(policy, None, EngineConfig(block_size=16))
    prompt = random_prompts([50], 512, seed=2)[0]
    greedy = SamplingParams(temperature=0, max_tokens=8)
    before = engine.generate([prompt], greedy)[0]
    new = {k: v + 0.02 * torch.randn_like(v) for k, v in policy.state_dict().items() if "norm" not in k}
    engine.load_weights(new, version=1)
    after = engine.generate([prompt], greedy)[0]
    fresh_model = copy.deepcopy(model)
    fresh_model.load_state_dict(new, strict=False)
    fresh = LLMEngine(fresh_model, None, EngineConfig(block_size=16)).generate([prompt], greedy)[0]
    assert after.token_ids == fresh.token_ids != before.token_ids  # no stale prefix KV was reused
    assert after.num_cached_prompt_tokens == 0
    assert before.versions == [0] * 8 and after.versions == [1] * 8
    with pytest.raises(Exception, match="unknown parameter"):
        engine.load_weights({"nope": torch.zeros(1)}, version=2)


def test_partial_rollout_spans_versions(model):
    import copy

    policy = copy.deepcopy(model)
    engine = LLMEngine(policy, None, EngineConfig(block_size=16))
    rid = engine.add_request(random_prompts([10], 512, seed=4)[0], SamplingParams(temperature=1.0, max_tokens=10))
    for _ in range(4):
        engine.step()
    engine.load_weights(policy.state_dict(), version=7)
    done = []
    while engine.has_unfinished():
        done += engine.step()
    (c,) = done
    assert c.request_id == rid and c.versions[:4] == [0] * 4 and c.versions[4:] == [7] * 6 and c.version == 7


def test_an_abort_waits_one_step_not_the_whole_generation(model):
    """The loop thread takes the engine lock again right after each step; the abort, waiting on it
    from another thread, must get it between two steps (FairLock), not after the generation ends."""
    engine = AsyncEngine(LLMEngine(model, None, EngineConfig(block_size=16)))
    params = SamplingParams(max_tokens=400, ignore_eos=True, seed=0)
    seen: list[int] = []
    aborted: list[Completion] = []

    async def main() -> None:
        async for item in engine.stream([1, 2, 3], params, request_id="long"):
            if isinstance(item, TokenEvent):
                seen.append(item.token_id)
                if len(seen) == 3:
                    steps = engine.engine.stats["steps"]
                    aborted.extend(await engine.abort("long"))
                    # a few steps at most, never the ~400 left: the abort's thread needs the GIL to reach the lock,
                    # and on a busy machine the tiny model's steps (~1 ms) can run several times before it does
                    assert engine.engine.stats["steps"] - steps <= 16, "the abort waited for more than a few steps"

    try:
        asyncio.run(main())
    finally:
        engine.close()
    assert aborted[0].finish_reason == "abort" and 3 <= len(aborted[0].token_ids) < 400


def test_speculation_is_a_per_request_choice(model):
    """One n-gram engine: a request submitted with speculate=False never drafts, one with the default does;
    both decode greedily to the same tokens (serve's standard and fast variants share an engine so)."""
    from temper.engine import SpeculativeConfig

    engine = AsyncEngine(LLMEngine(model, None, EngineConfig(block_size=16, speculative=SpeculativeConfig(
        method="ngram", ngram_min=1))))
    prompt = [5, 6, 7, 8] * 12  # repetitive: the n-gram proposer always finds something to copy
    greedy = SamplingParams(temperature=0, max_tokens=12, ignore_eos=True)

    async def run(speculate: bool) -> Completion:
        items = [item async for item in await engine.submit(prompt, greedy, speculate=speculate)]
        return items[-1]

    try:
        plain = asyncio.run(run(False))
        assert engine.engine.stats["draft_tokens"] == 0
        fast = asyncio.run(run(True))
        assert engine.engine.stats["draft_tokens"] > 0
    finally:
        engine.close()
    assert fast.token_ids == plain.token_ids and len(plain.token_ids) == 12
