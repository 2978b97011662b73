"""The engine's speed paths (fused q/k/v and gate/up, oneDNN's or MKL's packed weights: `EngineConfig.packed_weights`,
shared prefixes kept across steps: `cascade_prefix_bytes`)
change no output: seeded sampling and greedy decoding give the same tokens with and without them,
weight loads reach them, and they really ran."""

import copy

import pytest
import torch
from engine_helpers import random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine
from temper.generation import SamplingParams

KERNELS = ["onednn", "mkl"]


def engines(kernel: str = "auto", **kw) -> tuple[LLMEngine, LLMEngine]:
    model = tiny_pair(seed=3)[0]
    fast = LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, packed_weights=kernel, **kw))
    plain = LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, packed_weights="off", **kw))
    return fast, plain


@pytest.mark.parametrize("kernel", KERNELS)
def test_seeded_sampling_and_greedy_are_the_same_with_and_without_packed_weights(kernel: str):
    fast, plain = engines(kernel)
    prompts = random_prompts([40, 7, 90], 512, seed=5)
    for params in (SamplingParams(temperature=1.0, max_tokens=24, n=4, seed=11),
                   SamplingParams(temperature=0.7, top_p=0.9, max_tokens=24, n=2, seed=12),
                   SamplingParams(temperature=0, max_tokens=24)):
        a, b = fast.generate(prompts, params), plain.generate(prompts, params)
        assert [c.token_ids for c in a] == [c.token_ids for c in b]
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-4, rtol=1e-4)
    layer = fast.model.model.layers[0]
    assert layer.self_attn.qkv.kernel == kernel and layer.self_attn.qkv._packed is not None  # the packed GEMM ran
    assert layer.mlp.gate_up._packed is not None and fast.model.head._packed is not None
    assert plain.model.model.layers[0].self_attn.qkv.kernel is None


@pytest.mark.parametrize("kernel", KERNELS)
def test_a_weight_load_reaches_the_packed_weights(kernel: str):
    fast, plain = engines(kernel)
    prompt = random_prompts([60], 512, seed=6)[0]
    greedy = SamplingParams(temperature=0, max_tokens=12)
    before = fast.generate([prompt], greedy)[0].token_ids
    packed = fast.model.model.layers[1].mlp.gate_up._packed
    torch.manual_seed(1)
    new = {k: v + 0.05 * torch.randn_like(v) for k, v in fast.model.state_dict().items() if "norm" not in k}
    fast.load_weights(new, version=1)
    plain.load_weights(new, version=1)
    after = fast.generate([prompt], greedy)[0]
    assert after.token_ids == plain.generate([prompt], greedy)[0].token_ids != before
    assert after.versions == [1] * 12
    assert fast.model.model.layers[1].mlp.gate_up._packed is not packed  # repacked, not stale


@pytest.mark.parametrize("kv_dtype", ["int8", "int4"])
def test_quantized_kv_prefix_caching_and_speculation_on_the_packed_weights(kv_dtype):
    from temper.engine import SpeculativeConfig

    fast, plain = engines(kv_dtype=kv_dtype, speculative=SpeculativeConfig(method="ngram"))
    text = random_prompts([24], 512, seed=7)[0]
    prompt = text * 4  # repeats: n-gram drafts get accepted
    greedy = SamplingParams(temperature=0, max_tokens=32)
    first, again = (fast.generate([prompt], greedy)[0] for _ in "12")
    plain_first, plain_again = (plain.generate([prompt], greedy)[0] for _ in "12")
    assert first.token_ids == plain_first.token_ids and again.token_ids == plain_again.token_ids
    if kv_dtype == "int8":  # int4 moves this tiny model's logits by more than its top tokens' 0.05-nat margin
        assert first.token_ids == again.token_ids  # the first prefill attends to its exact keys, again to the cache
    assert again.num_cached_prompt_tokens > 0 and fast.stats["accepted_tokens"] > 0


def test_shared_prefixes_are_gathered_once_and_change_no_sample():
    """The n samples of a prompt attend to its cached blocks once per group (cascade attention); the
    gathered prefixes are kept across steps (`cascade_prefix_bytes`), which changes no token."""
    model = tiny_pair(seed=3)[0]
    kept, plain = (LLMEngine(copy.deepcopy(model), None, EngineConfig(block_size=16, cascade_prefix_bytes=b))
                   for b in (64 * 1024**2, 0))
    prompts = random_prompts([70, 45, 90], 512, seed=8)
    params = SamplingParams(temperature=1.0, max_tokens=24, n=4, seed=13)
    a, b = kept.generate(prompts, params), plain.generate(prompts, params)
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    torch.testing.assert_close(torch.tensor([c.logprobs for c in a]), torch.tensor([c.logprobs for c in b]))
    assert kept.runner.cascade_rows > 0 and kept.cache.prefix_reuses > 0  # kept copies served later steps
    assert plain.cache.prefix_reuses == 0


def test_a_kept_prefix_is_named_by_its_blocks_generations():
    """Freed blocks are handed out again with new contents: the kept gather is named by (block,
    generation), so the same ids with a new generation are gathered again, never served stale."""
    from temper.engine.kv_cache import KVCache

    cfg = tiny_pair(seed=3)[0].config
    cache = KVCache(cfg, num_blocks=4, block_size=16, kv_dtype="fp32")
    blocks = torch.tensor([2, 1])
    cache.k[0, :, 1:3] = torch.randn(cache.k[0, :, 1:3].shape)
    first = cache.gather_prefix(0, "k", blocks, ((2, 1), (1, 1)), 1).clone()
    # kept as one [head_dim, tokens] matrix per head: the gathered keys, transposed
    assert torch.equal(first, cache.gather(0, "k", blocks).flatten(1, 2).transpose(-1, -2)[:, None])
    cache.k[0, :, 1:3] = 2.0  # the blocks' next owners wrote them
    assert torch.equal(cache.gather_prefix(0, "k", blocks, ((2, 1), (1, 1)), 1), first)  # kept: not re-read
    assert cache.prefix_reuses == 1
    assert (cache.gather_prefix(0, "k", blocks, ((2, 2), (1, 2)), 1) == 2.0).all()  # new generation: gathered


def test_blocks_handed_out_again_get_a_new_generation_and_samples_stay_the_same():
    """Over rounds of new prompts on a small cache, blocks are evicted and handed out again; with the
    kept prefixes every round samples what the plain engine does."""
    model = tiny_pair(seed=3)[0]
    kw = dict(block_size=16, kv_budget_bytes=200_000)
    kept, plain = (LLMEngine(copy.deepcopy(model), None, EngineConfig(cascade_prefix_bytes=b, **kw))
                   for b in (64 * 1024**2, 0))
    params = SamplingParams(temperature=1.0, max_tokens=16, n=4, seed=14)
    for seed in (9, 10, 11, 12):  # same lengths, other tokens
        prompts = random_prompts([48, 48], 512, seed=seed)
        assert [c.token_ids for c in kept.generate(prompts, params)] == \
            [c.token_ids for c in plain.generate(prompts, params)]
    assert max(kept.blocks.generation) >= 3 and kept.cache.prefix_reuses > 0
