"""Speculative decoding with a draft model: greedy output is the plain engine's whatever the draft
(the same model, a different one, the target's first layers), and the draft machinery really ran."""

import copy

import pytest
import torch
from engine_helpers import check_greedy, random_prompts, tiny_pair

from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.errors import TemperError
from temper.generation import Completion, SamplingParams
from temper.models import LlamaForCausalLM, save_model

NEW = 24
GREEDY = SamplingParams(temperature=0, max_tokens=NEW)


def draft_config(**overrides) -> EngineConfig:
    spec = SpeculativeConfig(method="draft", **{"num_tokens": 4, **overrides})
    return EngineConfig(block_size=16, kv_budget_bytes=16 * 1024**2, speculative=spec)


@pytest.fixture(scope="module")
def target() -> LlamaForCausalLM:
    return tiny_pair(seed=0)[0]


@pytest.fixture(scope="module")
def prompts() -> list[list[int]]:
    return [*random_prompts([3, 9, 30, 1, 57, 12], 512, seed=8), random_prompts([6], 512, seed=9)[0] * 5]


@pytest.fixture(scope="module")
def plain(target, prompts) -> list[Completion]:
    return LLMEngine(target, None, EngineConfig(block_size=16)).generate(prompts, GREEDY)


@torch.inference_mode()
def margins(model: LlamaForCausalLM, prompt: list[int], tokens: list[int]) -> list[float]:
    """The target's top-two logit margin at each generated position (for check_greedy's near-tie rule)."""
    logits = model.logits(torch.tensor(prompt + tokens)[None])[0, len(prompt) - 1:]
    return [float(v[0] - v[1]) for v in torch.topk(logits, 2).values]


def assert_as_plain(engine: LLMEngine, outs: list[Completion], plain: list[Completion], label: str) -> None:
    report: list[str] = []
    for i, (c, p) in enumerate(zip(outs, plain, strict=True)):
        check_greedy(c.token_ids, p.token_ids, margins(engine.model, p.prompt_token_ids, p.token_ids), report,
                     f"{label} prompt {i}")
    assert not engine.has_unfinished() and engine.blocks.num_free == engine.blocks.num_blocks
    assert engine.speculator.proposer.states == {} and engine.speculator.draft_lens == {}, \
        "draft state outlived its sequences"
    print(engine.stats, "\n".join(report))


def test_same_model_as_draft_is_identical_and_accepts_nearly_all(target, prompts, plain):
    engine = LLMEngine(target, None, draft_config(), draft_model=target)
    assert_as_plain(engine, engine.generate(prompts, GREEDY), plain, "same-model draft")
    drafted, accepted = engine.stats["draft_tokens"], engine.stats["accepted_tokens"]
    assert drafted > 0 and accepted >= 0.9 * drafted


def noisy_copy(model: LlamaForCausalLM, scale: float, seed: int = 1) -> LlamaForCausalLM:
    """A different draft that agrees with `model` often, but not always."""
    draft = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in draft.named_parameters():
            if "norm" not in name:
                p.add_(torch.randn(p.shape, generator=g) * scale)
    return draft


def test_different_draft_rolls_back_and_stays_identical(target, prompts, plain):
    engine = LLMEngine(target, None, draft_config(), draft_model=noisy_copy(target, 0.004))
    assert_as_plain(engine, engine.generate(prompts, GREEDY), plain, "noisy draft")
    drafted, accepted = engine.stats["draft_tokens"], engine.stats["accepted_tokens"]
    assert 0 < accepted < drafted, "both accepted and rejected drafts (rollback) should occur"


def test_bf16_draft_for_an_fp32_target(target, prompts, plain):
    engine = LLMEngine(target, None, draft_config(), draft_model=copy.deepcopy(target).to(torch.bfloat16))
    assert_as_plain(engine, engine.generate(prompts, GREEDY), plain, "bf16 draft")
    assert engine.stats["accepted_tokens"] > 0


def test_draft_under_preemption_and_abort_frees_its_state(target, prompts, plain):
    # 16 blocks of 8 tokens for 7 sequences of up to 81 tokens: constant preemption.
    config = draft_config().model_copy(update={"block_size": 8, "kv_budget_bytes": 16 * 8 * 512})
    engine = LLMEngine(target, None, config, draft_model=noisy_copy(target, 0.004))
    assert_as_plain(engine, engine.generate(prompts, GREEDY), plain, "preempted draft")
    assert engine.scheduler.num_preemptions > 0 and engine.stats["accepted_tokens"] > 0
    rid = engine.add_request(prompts[0], SamplingParams(temperature=0, max_tokens=100))
    for _ in range(3):
        engine.step()
    assert engine.speculator.proposer.states  # drafting for the running request
    engine.abort(rid)
    assert engine.speculator.proposer.states == {}


def test_truncated_draft_shares_the_targets_weights(target, prompts, plain):
    engine = LLMEngine(target, None, draft_config(draft_layers=1))
    draft = engine.speculator.proposer.draft
    assert len(draft.model.layers) == 1 and draft.model.layers[0] is target.model.layers[0]
    assert draft.lm_head is target.lm_head and draft.model.embed_tokens is target.model.embed_tokens
    assert_as_plain(engine, engine.generate(prompts, GREEDY), plain, "first-layer draft")
    assert engine.stats["draft_tokens"] > 0


def test_draft_loaded_by_path_from_the_config(tiny_llama, smollm2_tokenizer, tmp_path):
    model = tiny_llama(seed=0)
    save_model(tiny_llama(seed=0), smollm2_tokenizer, tmp_path / "draft")
    engine = LLMEngine(model, None, EngineConfig(block_size=16, kv_budget_bytes=16 * 1024**2, speculative=(
        SpeculativeConfig(method="draft", draft_model=str(tmp_path / "draft"), num_tokens=4))))
    prompt = random_prompts([20], 49152, seed=3)[0]
    out = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=12))[0]
    assert out.token_ids == LLMEngine(model, None, EngineConfig(block_size=16)).generate(
        [prompt], SamplingParams(temperature=0, max_tokens=12))[0].token_ids
    assert engine.stats["accepted_tokens"] > 0  # the same weights: its drafts are the target's choices


def test_bad_draft_gives_a_clear_error(tiny_llama, smollm2_tokenizer, tmp_path):
    model = tiny_llama()
    with pytest.raises(TemperError, match=r"engine\.speculative\.draft_model: the draft's vocabulary \(50000"):
        LLMEngine(model, None, draft_config(), draft_model=tiny_llama(vocab_size=50000))
    save_model(tiny_llama(vocab_size=50000), smollm2_tokenizer, tmp_path / "big")
    with pytest.raises(TemperError, match=r"engine\.speculative\.draft_model: .*vocabulary"):
        LLMEngine(model, None, draft_config(draft_model=str(tmp_path / "big")))
    with pytest.raises(TemperError, match=r"engine\.speculative\.draft_model=.*no such file"):
        LLMEngine(model, None, draft_config(draft_model=str(tmp_path / "missing")))
    with pytest.raises(TemperError, match=r"needs engine\.speculative\.draft_model .* or .*draft_layers"):
        LLMEngine(model, None, draft_config())
    with pytest.raises(TemperError, match=r"draft_layers=3: the draft model has 2 layers"):
        LLMEngine(model, None, draft_config(draft_layers=3))


def test_smaller_draft_vocabulary_drafts_only_what_it_knows(target):
    draft = tiny_pair(seed=0, vocab_size=256)[0]
    engine = LLMEngine(target, None, draft_config(), draft_model=draft)
    known, unknown = [5, 6, 7, 8] * 4, [5, 6, 7, 300]
    engine.generate([unknown], SamplingParams(temperature=0, max_tokens=8))
    assert engine.stats["draft_tokens"] == 0  # a token without an embedding in the draft: no drafts
    engine.generate([known], SamplingParams(temperature=0, max_tokens=8))
    assert engine.stats["draft_tokens"] > 0


@pytest.mark.slow
@pytest.mark.e2e
def test_layer_skip_self_speculation_on_smollm2(smollm2):
    """SmolLM2 drafts for itself with its first 20 of 30 layers (shared embeddings, final norm and head)."""
    tok = smollm2.tokenizer
    chats = ["What is the capital of France?", "Write a haiku about the sea."]
    prompts = [tok.apply_chat_template([{"role": "user", "content": c}], add_generation_prompt=True, tokenize=True)
               for c in chats]
    params = SamplingParams(temperature=0, max_tokens=32, ignore_eos=True)
    base = EngineConfig(kv_budget_bytes=64 * 1024**2)
    plain_outs = LLMEngine(smollm2.model, tok, base).generate(prompts, params)
    spec = SpeculativeConfig(method="draft", draft_layers=20, num_tokens=4)
    engine = LLMEngine(smollm2.model, tok, base.model_copy(update={"speculative": spec}))
    assert_as_plain(engine, engine.generate(prompts, params), plain_outs, "smollm2 layer-skip")
    assert engine.stats["accepted_tokens"] > 0
