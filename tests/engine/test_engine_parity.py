"""Greedy parity: the engine against transformers and against dense full-forward decoding,
with each engine feature on and off (and proof that the feature really ran)."""

import itertools

import pytest
import torch
from engine_helpers import check_greedy, full_logprobs, random_prompts, reference_greedy, tiny_config, tiny_pair

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.generation import SamplingParams
from temper.models import LlamaForCausalLM, ModelConfig

NEW = 24


@pytest.fixture(scope="module")
def pair():
    return tiny_pair(seed=0)


@pytest.fixture(scope="module")
def prompts():
    system = random_prompts([40], 512, seed=7)[0]  # a shared "system prompt": 2.5 blocks of 16
    tails = random_prompts([3, 9, 30, 1, 57, 12], 512, seed=8)
    # Repetitive material so that prompt lookup finds n-grams to propose.
    loop = random_prompts([6], 512, seed=9)[0] * 5
    return [system + t for t in tails] + [loop, random_prompts([5], 512, seed=10)[0]]


@pytest.fixture(scope="module")
def references(pair, prompts):
    model, _ = pair
    return [reference_greedy(model, p, NEW) for p in prompts]


def test_greedy_matches_transformers_generate(pair, prompts, references):
    model, hf = pair
    engine = LLMEngine(model, None, EngineConfig(block_size=16))
    outs = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=NEW))
    report: list[str] = []
    for i, (p, c, (ref, margins)) in enumerate(zip(prompts, outs, references, strict=True)):
        hf_out = hf.generate(torch.tensor([p]), attention_mask=torch.ones(1, len(p), dtype=torch.long),
                             max_new_tokens=NEW, do_sample=False)[0, len(p):].tolist()
        check_greedy(c.token_ids, hf_out, margins, report, f"prompt {i} vs transformers")
        check_greedy(c.token_ids, ref, margins, report, f"prompt {i} vs full forward")
        assert c.finish_reason == "length" and len(c.token_ids) == NEW
        lp = full_logprobs(model, c)
        assert max(abs(a - b) for a, b in zip(lp, c.logprobs, strict=True)) < 1e-4
        assert c.versions == [0] * NEW
    print("\n".join(report))


FEATURES = {
    # name: (config, the counter that proves the feature ran)
    "prefix_cache_off": (EngineConfig(block_size=16, prefix_caching=False), None),
    "prefix_cache_on": (EngineConfig(block_size=16), lambda e: e.blocks.hit_tokens),
    # The six prompts that share a system prompt decode against its two full blocks once per group.
    "cascade_attention": (EngineConfig(block_size=16), lambda e: e.runner.cascade_rows),
    "cascade_attention_off": (EngineConfig(block_size=16, cascade_attention=False), None),
    "chunked_prefill": (EngineConfig(block_size=16, max_num_batched_tokens=20),
                        lambda e: e.scheduler.num_prefill_chunks - 8),
    "unchunked_prefill": (EngineConfig(block_size=16, chunked_prefill=False, max_num_batched_tokens=20), None),
    # 16 blocks of 8 tokens for 8 sequences of up to 121 tokens: constant preemption.
    "preemption": (EngineConfig(block_size=8, kv_budget_bytes=16 * 8 * 512), lambda e: e.scheduler.num_preemptions),
    "ngram_speculation": (EngineConfig(block_size=16, speculative=SpeculativeConfig(method="ngram", num_tokens=4)),
                          lambda e: e.stats["accepted_tokens"]),
    "ngram_speculation_fixed_length": (
        EngineConfig(block_size=16, speculative=SpeculativeConfig(method="ngram", num_tokens=4, adaptive=False)),
        lambda e: e.stats["accepted_tokens"]),
    "large_blocks": (EngineConfig(block_size=128), None),
    # Decode rows read their own keys from the decode buffer, appending one token a step.
    "decode_buffer": (EngineConfig(block_size=16), lambda e: e.runner.buffer.appended_rows),
    "decode_buffer_off": (EngineConfig(block_size=16, decode_buffer_bytes=0), None),
    # Room for 10 slots of 80 own tokens (tiny model: 512 bytes per slot-token): the longest row outgrows it.
    "decode_buffer_over_budget": (EngineConfig(block_size=16, decode_buffer_bytes=512 * 10 * 80),
                                  lambda e: e.runner.buffer.appended_rows * e.runner.buffer.fallback_steps),
    # Unchunked prefill attended 16 queries at a time (the path long prompts take).
    "query_chunked_attention": (EngineConfig(block_size=16, attention_chunk=16, chunked_prefill=False), None),
}


@pytest.mark.parametrize("name", list(FEATURES))
def test_greedy_identical_with_feature(name, pair, prompts, references):
    model, _ = pair
    config, ran = FEATURES[name]
    engine = LLMEngine(model, None, config)
    outs = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=NEW))
    report: list[str] = []
    for i, (c, (ref, margins)) in enumerate(zip(outs, references, strict=True)):
        check_greedy(c.token_ids, ref, margins, report, f"{name} prompt {i}")
    if ran is not None:
        assert ran(engine) > 0, f"{name}: the feature did not run"
    assert not engine.has_unfinished() and engine.blocks.num_free == engine.blocks.num_blocks
    print("\n".join(report))


@pytest.mark.parametrize("overrides", [
    {"architecture": "Qwen2ForCausalLM", "model_type": "qwen2", "attention_bias": True},
    {"architecture": "Qwen3ForCausalLM", "model_type": "qwen3", "qk_norm": True},
    {"rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    {"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64}},
    {"architecture": "MistralForCausalLM", "model_type": "mistral", "sliding_window": 20},
], ids=["qwen2", "qwen3", "rope_linear", "rope_llama3", "mistral_window"])
def test_architectures_and_rope_scaling(overrides):
    torch.manual_seed(1)
    model = LlamaForCausalLM(tiny_config(**overrides)).eval()
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" not in n:
                p.normal_(0, 0.08)
    prompts = random_prompts([70, 5, 33], 512, seed=3)
    engine = LLMEngine(model, None, EngineConfig(block_size=16, max_num_batched_tokens=32))
    outs = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=16))
    report: list[str] = []
    for i, (p, c) in enumerate(zip(prompts, outs, strict=True)):
        ref, margins = reference_greedy(model, p, 16)
        check_greedy(c.token_ids, ref, margins, report, f"{overrides} prompt {i}")
        assert max(abs(a - b) for a, b in zip(full_logprobs(model, c), c.logprobs, strict=True)) < 1e-4


def test_int8_int4_and_bf16_kv_run_every_path(pair, prompts, references):
    from temper.engine.kv_cache import kv_bytes_per_token

    model, _ = pair
    smollm2_shape = ModelConfig()  # head_dim 64: 64 int8 + one fp32 scale vs 64 fp32 per head
    assert kv_bytes_per_token(smollm2_shape, "fp32") / kv_bytes_per_token(smollm2_shape, "int8") >= 3.5
    # int4: 32 bytes of levels per head, + two fp16 scales (values) or a per-channel step and minimum per block (keys)
    assert kv_bytes_per_token(smollm2_shape, "fp32") / kv_bytes_per_token(smollm2_shape, "int4") >= 7
    for kv_dtype in ("int8", "int4", "bf16"):
        budget = 16 * 8 * kv_bytes_per_token(model.config, kv_dtype, block_size=8)  # 16 blocks of 8 tokens
        engine = LLMEngine(model, None, EngineConfig(block_size=8, kv_dtype=kv_dtype, kv_budget_bytes=budget,
                                                     max_num_batched_tokens=20))
        outs = engine.generate(prompts, SamplingParams(temperature=0, max_tokens=NEW))
        assert engine.scheduler.num_preemptions > 0 and engine.blocks.hit_tokens > 0
        agree = sum(a == b for c, (ref, _) in zip(outs, references, strict=True)
                    for a, b in zip(c.token_ids, ref, strict=True))
        # int4's step is 1/7 of a head's absmax (8.6% error per element on these 16-channel heads): this tiny
        # random model's greedy path drifts from fp32's after a few tokens (SmolLM2's quality is measured in
        # test_engine_smollm2.py); the paths must still run, and agree far beyond chance (1/512)
        assert agree / (NEW * len(prompts)) > (0.25 if kv_dtype == "int4" else 0.8), kv_dtype


def test_sliding_window_with_sinks_matches_a_dense_masked_forward(pair):
    from temper.engine.paged_attention import window_mask
    from temper.models.attention import sdpa

    class WindowSinks:  # dense reference: the same mask on the whole sequence
        def __call__(self, layer, q, k, v):
            pos = torch.arange(q.shape[1])
            return sdpa(q, k, v, window_mask(pos, pos, 24, 4)[None, None], causal=False)

    model, _ = pair
    prompt = random_prompts([70], 512, seed=12)[0]
    engine = LLMEngine(model, None, EngineConfig(block_size=16, sliding_window=24, sink_tokens=4,
                                                 max_num_batched_tokens=32))
    out = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=12))[0]
    ids, report = list(prompt), []
    margins = []
    with torch.inference_mode():
        for _ in range(12):
            logits = model.logits(torch.tensor(ids)[None], attention=WindowSinks())[0, -1]
            top = torch.topk(logits, 2).values
            margins.append(float(top[0] - top[1]))
            ids.append(int(logits.argmax()))
    check_greedy(out.token_ids, ids[len(prompt):], margins, report, "window+sinks")


def test_adaptive_draft_length_grows_while_drafts_hold_and_shrinks_after_a_miss(pair, prompts, references):
    """Proposals start at initial_tokens, +2 after a fully accepted draft, -1 after a rejection."""
    model, _ = pair
    spec = SpeculativeConfig(method="ngram", num_tokens=8, initial_tokens=2)
    engine = LLMEngine(model, None, EngineConfig(block_size=16, speculative=spec))
    asked: list[tuple[int, int]] = []  # (sequence, draft length asked for) per step
    proposer = engine.speculator.proposer
    inner = proposer.propose_batch
    proposer.propose_batch = lambda asks: (asked.extend((s.seq_id, k) for s, k in asks), inner(asks))[1]
    loop = prompts[-2]  # the repetitive prompt: its lookups keep hitting
    out = engine.generate([loop], SamplingParams(temperature=0, max_tokens=NEW))[0]
    report: list[str] = []
    check_greedy(out.token_ids, references[-2][0], references[-2][1], report, "adaptive")
    lengths = [k for _, k in asked]
    assert lengths[0] == 2 and max(lengths) > 2, lengths  # grew from the initial length
    assert max(lengths) <= 8 and any(b == a - 1 for a, b in itertools.pairwise(lengths)), lengths
    assert all(b - a in (2, -1, 0) or b < a for a, b in itertools.pairwise(lengths)), lengths
    assert engine.speculator.draft_lens == {} and proposer.indexes == {}  # nothing outlives its sequence


@pytest.mark.parametrize("kv_dtype", ["fp32", "int8", "int4"])
def test_cascade_attention_and_decode_buffer_give_the_same_samples_and_logprobs(pair, prompts, kv_dtype):
    """n samples of a prompt share its blocks: seeded sampling with cascade attention and the
    decode buffer each on and off (int8, int4: the buffer holds exactly what a gather dequantizes)."""
    model, _ = pair
    params = SamplingParams(temperature=1.0, n=4, seed=3, max_tokens=NEW)
    runs = {}
    for cascade, buffer in itertools.product((True, False), (True, False)):
        engine = LLMEngine(model, None, EngineConfig(block_size=16, cascade_attention=cascade, kv_dtype=kv_dtype,
                                                     decode_buffer_bytes=2**30 if buffer else 0))
        runs[cascade, buffer] = engine.generate(prompts[:3], params)
        assert (engine.runner.cascade_rows > 0) == cascade
        assert (engine.runner.buffer.appended_rows > 0) == buffer
    base = runs[False, False]
    # A rounding difference in one layer's attention can move a later key across an int8 rounding
    # step (1/127 of its absmax), so int8 differences are larger (measured 2.5e-4 vs 1.4e-6 in fp32);
    # a dequantization error would be orders of magnitude larger.
    tolerance = {"fp32": 1e-4, "int8": 1e-3, "int4": 1e-2}[kv_dtype]  # int4's step is 1/7 of the absmax
    for run in runs.values():
        for on, off in zip(run, base, strict=True):
            assert on.token_ids == off.token_ids
            assert max(abs(a - b) for a, b in zip(on.logprobs, off.logprobs, strict=True)) < tolerance
    assert len({tuple(c.token_ids) for c in base[:4]}) > 1  # the samples did differ


def test_n_samples_fork_the_computed_prompt_and_sample_as_separate_requests_would(pair, prompts):
    """Parallel sampling computes a prompt once: the other samples take its KV (full blocks shared,
    the partly filled last block copied) and draw their first token from the same logits."""
    model, _ = pair
    n = 4
    forked = LLMEngine(model, None, EngineConfig(block_size=16))
    together = forked.generate(prompts[:3], SamplingParams(temperature=1.0, n=n, seed=3, max_tokens=NEW))
    assert forked.stats["forked_samples"] == 3 * (n - 1)
    alone = LLMEngine(model, None, EngineConfig(block_size=16))
    # Sample i of a request with seed s draws from seed s + i: the same draws, one request each.
    separate = alone.generate([p for p in prompts[:3] for _ in range(n)],
                              [SamplingParams(temperature=1.0, seed=3 + i, max_tokens=NEW)
                               for _ in prompts[:3] for i in range(n)])
    assert alone.stats["forked_samples"] == 0
    # Under KV pressure forks, preemptions and recomputation mix: still the same samples.
    pressed = LLMEngine(model, None, EngineConfig(block_size=16, kv_budget_bytes=20 * 16 * 512))
    squeezed = pressed.generate(prompts[:3], SamplingParams(temperature=1.0, n=n, seed=3, max_tokens=NEW))
    assert pressed.scheduler.num_preemptions > 0 and pressed.stats["forked_samples"] > 0
    for a, b, c in zip(together, separate, squeezed, strict=True):
        assert a.token_ids == c.token_ids
        assert a.token_ids == b.token_ids
        assert max(abs(x - y) for x, y in zip(a.logprobs, b.logprobs, strict=True)) < 1e-4
    assert len({tuple(c.token_ids) for c in together[:n]}) > 1  # the samples did differ


def test_shared_prefixes_groups_rows_by_their_common_cached_blocks():
    from temper.engine.model_runner import shared_prefixes

    tables = [[1, 2, 3, 10], [1, 2, 3, 11], [1, 2, 4, 12], [1, 2, 4, 13, 14], [5, 6], [7]]
    groups = sorted(shared_prefixes(tables))
    # rows 0-1 share blocks 1-3, rows 2-3 share 1, 2, 4; a row's last block is always its own
    assert groups == [([0, 1], [1, 2, 3]), ([2, 3], [1, 2, 4])]
    assert shared_prefixes([[1, 2], [1, 3]]) == [([0, 1], [1])]
    assert shared_prefixes([[1], [1]]) == []  # only the block being written: nothing to share
