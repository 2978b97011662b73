"""Sampling: seeded reproducibility, frequencies that match the softmax, truncation, penalties,
stop conditions, logprobs under the temperature-scaled distribution, per-request errors."""

import math

import pytest
import torch
from engine_helpers import full_logprobs, random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine
from temper.engine.sampler import apply_penalties, inverse_cdf, truncate
from temper.generation import SamplingParams


@pytest.fixture(scope="module")
def model():
    return tiny_pair(seed=0)[0]


def engine_for(model, **kw) -> LLMEngine:
    return LLMEngine(model, None, EngineConfig(block_size=16, **kw))


def test_seeded_sampling_is_reproducible_whatever_the_batch(model):
    prompt = random_prompts([20], 512, seed=1)[0]
    params = SamplingParams(temperature=1.0, max_tokens=20, seed=123, n=3)
    alone = engine_for(model).generate([prompt], params)
    others = random_prompts([7, 33, 12], 512, seed=2)
    crowded = engine_for(model, max_num_batched_tokens=16).generate(
        [*others, prompt], [SamplingParams(temperature=0.9, max_tokens=25, seed=5)] * 3 + [params])[-3:]
    assert [c.token_ids for c in alone] == [c.token_ids for c in crowded]
    assert len({tuple(c.token_ids) for c in alone}) == 3  # the n samples differ from one another
    again = engine_for(model).generate([prompt], SamplingParams(temperature=1.0, max_tokens=20, seed=124))
    assert again[0].token_ids == alone[1].token_ids  # sample i uses seed + i


def chi_square(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson chi-square over tokens expected >= 5 times, the rest lumped into one bin."""
    n = counts.sum()
    expected = probs * n
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum()[None]]).double()
    exp = torch.cat([expected[big], expected[~big].sum()[None]]).double()
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    return stat, int(keep.sum()) - 1


@pytest.mark.parametrize("params", [
    dict(temperature=0.8),
    dict(temperature=1.3, top_k=12, top_p=0.9),
    dict(temperature=1.0, min_p=0.05),
], ids=["temperature", "top_k_top_p", "min_p"])
def test_sampled_frequencies_match_the_distribution(model, params):
    prompt = random_prompts([40], 512, seed=3)[0]
    n = 3000
    engine = engine_for(model, max_num_seqs=512, max_num_batched_tokens=1024)
    outs = engine.generate([prompt], SamplingParams(max_tokens=1, n=n, seed=0, **params))
    assert engine.blocks.hit_tokens > 0  # the n samples share the prompt's blocks
    with torch.inference_mode():
        logits = model.logits(torch.tensor(prompt)[None])[0, -1].float()
    probs = truncate(logits / params["temperature"], params.get("top_k", 0), params.get("top_p", 1.0),
                     params.get("min_p", 0.0)).softmax(-1)
    counts = torch.bincount(torch.tensor([c.token_ids[0] for c in outs]), minlength=512).double()
    assert counts[probs == 0].sum() == 0, "sampled a token that truncation excludes"
    stat, dof = chi_square(counts, probs)
    # 99.9% quantile of chi-square(dof), Wilson-Hilferty approximation.
    z = 3.09
    limit = dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3
    assert stat < limit, f"chi-square {stat:.1f} over {dof} dof exceeds {limit:.1f}"
    # Logprobs are the untruncated, temperature-scaled ones.
    ref = torch.log_softmax(logits / params["temperature"], -1)
    for c in outs[:50]:
        assert abs(c.logprobs[0] - float(ref[c.token_ids[0]])) < 1e-4


def test_logprobs_and_top_alternatives_at_temperature(model):
    prompts = random_prompts([15, 40], 512, seed=4)
    outs = engine_for(model).generate(prompts, SamplingParams(temperature=0.7, top_p=0.8, max_tokens=12, seed=1,
                                                              logprobs=3))
    for c in outs:
        ref = full_logprobs(model, c, temperature=0.7)
        assert max(abs(a - b) for a, b in zip(ref, c.logprobs, strict=True)) < 1e-4
        assert len(c.top_logprobs) == 12 and all(len(t) == 3 for t in c.top_logprobs)
        for lp, top in zip(c.logprobs, c.top_logprobs, strict=True):
            assert max(top.values()) >= lp - 1e-6


@pytest.mark.parametrize("vocab", [49152, 1000, 7])
def test_two_level_inverse_cdf_picks_what_a_full_cumulative_sum_picks(vocab):
    g = torch.Generator().manual_seed(vocab)
    probs = torch.softmax(torch.randn(64, vocab, generator=g) * 3, -1)
    probs[:, vocab // 2] = 0.0  # a token that must never be drawn
    u = torch.rand(64, generator=g, dtype=torch.float64)
    cdf = probs.double().cumsum(-1)
    expected = torch.searchsorted(cdf, (u * cdf[:, -1])[:, None])[:, 0]
    assert torch.equal(inverse_cdf(probs, u, block=64), expected)
    assert torch.equal(inverse_cdf(probs, u), expected)
    assert not (inverse_cdf(probs, u) == vocab // 2).any()


def test_penalties_follow_their_definitions():
    from transformers import RepetitionPenaltyLogitsProcessor

    from temper.engine.sequence import Sequence

    logits = torch.randn(50)
    seq = Sequence(0, "r", 0, [1, 2, 3], SamplingParams(repetition_penalty=1.3), 0, 0)
    seq.token_ids += [3, 7, 7]
    ours = apply_penalties(logits.clone(), seq)
    theirs = RepetitionPenaltyLogitsProcessor(1.3)(torch.tensor([seq.token_ids]), logits.clone()[None])[0]
    assert torch.allclose(ours, theirs)
    seq.params = SamplingParams(presence_penalty=0.5, frequency_penalty=0.25)
    ours = apply_penalties(logits.clone(), seq)
    expected = logits.clone()
    expected[3] -= 0.5 + 0.25
    expected[7] -= 0.5 + 0.5
    assert torch.allclose(ours, expected)


def test_penalised_greedy_runs(model):
    prompt = random_prompts([10], 512, seed=5)[0]
    plain = engine_for(model).generate([prompt], SamplingParams(temperature=0, max_tokens=30))[0]
    penal = engine_for(model).generate([prompt], SamplingParams(temperature=0, max_tokens=30,
                                                                repetition_penalty=5.0))[0]
    assert len(set(penal.token_ids)) >= len(set(plain.token_ids))


def test_stop_token_ids_and_max_tokens(model):
    prompt = random_prompts([10], 512, seed=6)[0]
    free = engine_for(model).generate([prompt], SamplingParams(temperature=0, max_tokens=20))[0]
    stop = free.token_ids[5]
    first = free.token_ids.index(stop)
    out = engine_for(model).generate([prompt], SamplingParams(temperature=0, max_tokens=20, stop_token_ids=[stop]))[0]
    assert out.token_ids == free.token_ids[: first + 1]
    assert (out.finish_reason, out.stop_reason) == ("stop", stop)
    assert len(free.token_ids) == 20 and free.finish_reason == "length"


def test_stop_strings_and_eos_with_a_tokenizer(tiny_llama, smollm2_tokenizer):
    model = tiny_llama(seed=3)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "norm" not in n:
                p.normal_(0, 0.08)
    tok = smollm2_tokenizer
    engine = LLMEngine(model, tok, EngineConfig(block_size=16))
    free = engine.generate("The weather today is", SamplingParams(temperature=0, max_tokens=16, ignore_eos=True))[0]
    assert free.text == tok.decode(free.token_ids)
    stop = free.text[len(free.text) // 2: len(free.text) // 2 + 3]
    out = engine.generate("The weather today is", SamplingParams(temperature=0, max_tokens=16, stop=[stop]))[0]
    assert out.finish_reason == "stop" and out.stop_reason == stop
    assert stop not in out.text and free.text.startswith(out.text)
    eos = next(iter(tok.eos_token_ids))
    assert eos in engine.eos_ids


def test_bad_requests_fail_alone(model):
    engine = engine_for(model, max_model_len=64)
    good = random_prompts([10], 512)[0]
    outs = engine.generate([good, good, list(range(80)), [999999], good],
                           [SamplingParams(temperature=0, max_tokens=5), SamplingParams(temperature=-1),
                            SamplingParams(), SamplingParams(), SamplingParams(top_p=0)])
    assert [c.finish_reason for c in outs] == ["length", "error", "error", "error", "error"]
    assert "temperature" in outs[1].error and "request" in outs[1].error
    assert "80 tokens" in outs[2].error
    assert "vocabulary" in outs[3].error
    assert "top_p" in outs[4].error
    assert len(outs[0].token_ids) == 5


def test_prompt_logprobs_score_the_prompt(model):
    prompt = random_prompts([45], 512, seed=11)[0]
    engine = engine_for(model, max_num_batched_tokens=16)  # scored over three chunks
    c = engine.generate([prompt, prompt], SamplingParams(temperature=0, max_tokens=2, prompt_logprobs=True,
                                                         logprobs=1))[1]
    with torch.inference_mode():
        lp = torch.log_softmax(model.logits(torch.tensor(prompt)[None])[0].float(), -1)
    ref = [float(lp[i - 1, prompt[i]]) for i in range(1, len(prompt))]
    assert c.prompt_logprobs[0] is None and len(c.prompt_logprobs) == len(prompt)
    assert max(abs(a - b) for a, b in zip(c.prompt_logprobs[1:], ref, strict=True)) < 1e-4
    assert [next(iter(t)) for t in c.prompt_top_logprobs[1:]] == lp[:-1].argmax(-1).tolist()
