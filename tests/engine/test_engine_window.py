"""A sliding window with attention sinks bounds the engine's memory: blocks that leave the window are released,
and each step reads only the blocks a sequence still holds."""

import math

import pytest
import torch
from engine_helpers import check_greedy, random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.engine.paged_attention import window_mask
from temper.generation import SamplingParams
from temper.models.attention import sdpa

W, S, BS = 64, 4, 16  # window, sinks, block size
BOUND = math.ceil((S + W) / BS) + 1  # blocks a sequence may hold: its sinks' block and the window's


class WindowSinks:
    """The dense reference: the window-and-sinks mask over the whole sequence."""

    def __call__(self, layer, q, k, v):
        pos = torch.arange(q.shape[1])
        return sdpa(q, k, v, window_mask(pos, pos, W, S)[None, None], causal=False)


def _engine(model, **kw) -> LLMEngine:
    # room for 3 sequences' windows and prefill chunks only: without releases none of them would fit
    return LLMEngine(model, None, EngineConfig(block_size=BS, sliding_window=W, sink_tokens=S, max_model_len=10_000,
                                               kv_budget_bytes=40 * BS * 2 * 2 * 2 * 16 * 4,
                                               max_num_batched_tokens=32, **kw))


def test_a_long_generation_holds_a_bounded_number_of_blocks():
    model, _ = tiny_pair(seed=2)
    engine = _engine(model)
    assert engine.blocks.num_blocks == 40
    prompts = random_prompts([200, 90, 30], 512, seed=3)
    for i, p in enumerate(prompts):
        engine.add_request(p, SamplingParams(temperature=1.0, max_tokens=700, ignore_eos=True, seed=i))
    held = []
    while engine.has_unfinished():
        engine.step()
        held += [engine.blocks.blocks_in_use(s) for s in engine.scheduler.running]
    # a sequence reached 900 tokens (57 blocks of 16) in a 40-block cache shared by three
    assert engine.stats["window_released_blocks"] > 100 and engine.stats["generated_tokens"] == 3 * 700
    assert max(held) <= BOUND + 2  # + the prefill chunk's (32 tokens) blocks ahead of the window
    assert max(held[-100:]) <= BOUND, (max(held[-100:]), BOUND)  # decoding only, by then


def test_released_blocks_change_no_token():
    """Greedy decoding past many windows equals full forwards with the same mask (prompt longer than the window,
    so the prefill itself releases blocks), and so does n-gram speculation on top."""
    model, _ = tiny_pair(seed=2)
    prompt = random_prompts([150], 512, seed=12)[0]
    new = 80
    ids, margins = list(prompt), []
    with torch.inference_mode():
        for _ in range(new):
            logits = model.logits(torch.tensor(ids)[None], attention=WindowSinks())[0, -1]
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            ids.append(int(logits.argmax()))
    for kw in ({}, {"speculative": SpeculativeConfig(method="ngram")}):
        engine = _engine(model, **kw)
        out = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=new, ignore_eos=True))[0]
        assert engine.stats["window_released_blocks"] > 0
        report: list[str] = []
        check_greedy(out.token_ids, ids[len(prompt):], margins, report, f"window+sinks {kw}")


@pytest.mark.parametrize("kv_dtype", ["int8", "int4"])
def test_a_quantized_windowed_cache_releases_blocks_too(kv_dtype):
    model, _ = tiny_pair(seed=2)
    engine = _engine(model, kv_dtype=kv_dtype)
    out = engine.generate([random_prompts([100], 512, seed=4)[0]],
                          SamplingParams(temperature=0, max_tokens=300, ignore_eos=True))[0]
    assert len(out.token_ids) == 300 and engine.stats["window_released_blocks"] >= (400 - W) // BS - 2
