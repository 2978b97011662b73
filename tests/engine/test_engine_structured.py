"""Structured outputs in the engine: every sample stays inside its JSON schema, regex or choice; the
logprobs are those of the constrained distribution; speculative drafts are checked against the
grammar (kept drafts are the constrained greedy choice, so the output is unchanged); a constraint
that cannot compile fails its own request."""

import json
import re

import jsonschema
import pytest
import torch
from engine_helpers import full_logprobs

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.generation import RequestError, SamplingParams, StructuredOutputs

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ok", "n", "color", "tags"],
          "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
                         "color": {"enum": ["red", "green", "blue"]},
                         "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b"]}}}}


@pytest.fixture(scope="module")
def engine(smollm2_tokenizer):
    from temper.models import LlamaForCausalLM, ModelConfig

    cfg = ModelConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
                      architecture="LlamaForCausalLM", model_type="llama")
    torch.manual_seed(0)
    return LLMEngine(LlamaForCausalLM(cfg).eval(), smollm2_tokenizer, EngineConfig(block_size=16))


def test_json_schema_holds_for_every_sample_at_temperature_1(engine, smollm2_tokenizer):
    so = StructuredOutputs(json=json.dumps(SCHEMA))
    prompt = smollm2_tokenizer.encode("Describe a thing as JSON:")
    outs = engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=80, n=20, seed=3, structured=so))
    assert len(outs) == 20
    for c in outs:
        assert c.finish_reason == "stop", c.text
        jsonschema.validate(json.loads(c.text), SCHEMA)
    # a random model left alone writes no JSON at all: the constraint, not luck, made these
    free = engine.generate([prompt], SamplingParams(temperature=1.0, max_tokens=30, seed=3))[0]
    with pytest.raises(ValueError):
        json.loads(free.text)
    assert len({c.text for c in outs}) > 1  # sampled, not forced: the samples differ


def test_regex_and_choice(engine, smollm2_tokenizer):
    prompt = smollm2_tokenizer.encode("Code:")
    for c in engine.generate([prompt], SamplingParams(max_tokens=20, n=8, seed=0,
                                                      structured=StructuredOutputs(regex=r"[a-c]{3}-[0-9]{2}"))):
        assert re.fullmatch(r"[a-c]{3}-[0-9]{2}", c.text), c.text
    choices = ("yes please", "no thanks")
    for c in engine.generate([prompt], SamplingParams(max_tokens=20, n=8, seed=0,
                                                      structured=StructuredOutputs(choice=choices))):
        assert c.text in choices and c.finish_reason == "stop"


def test_logprobs_are_those_of_the_constrained_distribution(engine, smollm2_tokenizer):
    """Each token's logprob is renormalised over what the grammar allows: above its logprob under
    the free softmax (near log(1/49152) for this random model)."""
    so = StructuredOutputs(regex=r"(yes|no)")
    c = engine.generate([smollm2_tokenizer.encode("Say:")], SamplingParams(max_tokens=10, seed=0, structured=so))[0]
    free = full_logprobs(engine.model, c)
    assert c.text in ("yes", "no")
    assert all(lp > f + 1.0 for lp, f in zip(c.logprobs, free, strict=True))
    assert c.token_ids[-1] in engine.eos_ids and c.finish_reason == "stop"  # the end: only stop tokens allowed


@pytest.mark.slow
@pytest.mark.e2e
def test_speculative_drafts_are_checked_against_the_grammar(smollm2):
    """The prompt holds the allowed text and a near miss: the n-gram drafts it yields are cut where the
    grammar forbids them, the rest verified against the constrained greedy choice; the output is the
    plain engine's, token for token."""
    tok = smollm2.tokenizer
    prompt = tok.encode("Words: alpha beta gamma delta zeta eta. Words: alpha beta gamma delta epsilon eta. Words:")
    so = StructuredOutputs(choice=(" alpha beta gamma delta epsilon eta theta iota",))
    params = SamplingParams(temperature=0, max_tokens=30, structured=so)
    cfg = EngineConfig(block_size=16, kv_budget_bytes=128 * 1024**2)
    plain = LLMEngine(smollm2.model, tok, cfg).generate([prompt], params)[0]
    spec = LLMEngine(smollm2.model, tok, cfg.model_copy(update={
        "speculative": SpeculativeConfig(method="ngram", num_tokens=4)}))
    fast = spec.generate([prompt], params)[0]
    assert fast.token_ids == plain.token_ids and fast.text == so.choice[0]
    assert spec.stats["accepted_tokens"] > 0 and spec.stats["draft_tokens"] > spec.stats["accepted_tokens"] - 1


def test_a_constraint_that_cannot_compile_fails_its_request_alone(engine, smollm2_tokenizer):
    bad = StructuredOutputs(grammar="root ::= undefined_rule")
    with pytest.raises(RequestError, match=r"sampling_params\.structured\.grammar: cannot compile"):
        engine.add_request([1, 2, 3], SamplingParams(structured=bad), request_id="bad")
    with pytest.raises(RequestError, match="exactly one of"):
        engine.add_request([1, 2, 3], SamplingParams(structured=StructuredOutputs(regex="a", json="{}")))
    with pytest.raises(RequestError, match=r"structured\.json: not valid JSON"):
        engine.add_request([1, 2, 3], SamplingParams(structured=StructuredOutputs(json="{nope")))
    ok = engine.generate([[1, 2, 3]], SamplingParams(max_tokens=3, seed=0))[0]
    assert ok.finish_reason == "length"


def test_a_pinned_grammar_is_not_evicted_before_its_request_is_queued(engine, monkeypatch):
    """A server compiles a request's constraint off the engine's thread, then queues the request: other
    requests' compiles meanwhile must not evict it (it would compile again, with no time limit)."""
    grammars = engine.grammars
    monkeypatch.setattr(grammars, "cache_size", 1)
    mine, others = StructuredOutputs(regex=r"[a-c]{5}"), [StructuredOutputs(regex=f"x{i}[0-9]") for i in range(3)]
    compiles = []
    real = grammars._compile
    monkeypatch.setattr(grammars, "_compile", lambda so: compiles.append(so) or real(so))
    with grammars.pinned(mine):
        first = grammars.compiled(mine, "mine")
        for so in others:
            grammars.compiled(so, "other")
        assert grammars.compiled(mine, "mine") is first and compiles.count(mine) == 1  # still cached
    assert list(grammars._cache) == [mine]  # unpinned: back to its size, the most recently used kept
    grammars.compiled(others[0], "other")  # evicts it now
    grammars.compiled(mine, "mine")
    assert compiles.count(mine) == 2  # the proof that eviction works at all
