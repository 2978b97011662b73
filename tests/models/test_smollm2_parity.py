"""The real SmolLM2-135M-Instruct: temper's GGUF conversion + decoder against transformers' own
GGUF loader + LlamaForCausalLM (an independent path: its dequantisation, renaming and q/k
un-permutation). Needs `accelerate`, which transformers requires for GGUF files."""

import pytest
import torch

from temper.models import generate_reference
from temper.models.registry import BUNDLED

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain how photosynthesis works, step by step.",
    "List five fruits and describe the taste of each one.",
    "What are the benefits of regular exercise? Give a detailed answer.",
]


@pytest.fixture(scope="module")
def hf_smollm2():
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    gguf = BUNDLED["smollm2-135m"].gguf_path("smollm2-135m")
    model = transformers.AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    return model.eval()


def _chat_ids(tokenizer, prompt: str) -> list[int]:
    return tokenizer.apply_chat_template([{"role": "user", "content": prompt}], add_generation_prompt=True,
                                         tokenize=True)


def test_logits_and_greedy_continuations_match_transformers(smollm2, hf_smollm2):
    """temper generates greedily; transformers, given the same tokens, must (a) produce logits
    within 1e-3 at every position and (b) pick the same next token at every generated step,
    i.e. its greedy continuation is the same. One transformers forward per prompt instead of a
    decode loop keeps this cheap on a busy machine."""
    tok = smollm2.tokenizer
    for prompt in PROMPTS:
        ids = _chat_ids(tok, prompt)
        ours = generate_reference(smollm2.model, ids, max_new_tokens=36, eos_ids=tok.eos_token_ids)
        assert len(ours) >= 32, tok.decode(ours)
        full = torch.tensor([ids + ours])
        with torch.no_grad():
            hf_logits, our_logits = hf_smollm2(full).logits[0], smollm2.model.logits(full)[0]
        assert (hf_logits - our_logits).abs().max().item() < 1e-3, prompt
        hf_choices = hf_logits[len(ids) - 1 : -1].argmax(-1).tolist()
        assert hf_choices == ours, (tok.decode(ours), tok.decode(hf_choices))


def test_greedy_decode_loop_matches_transformers_generate(smollm2, hf_smollm2):
    """transformers' own generate loop (KV cache, step by step) on one prompt."""
    tok = smollm2.tokenizer
    ids = _chat_ids(tok, PROMPTS[0])
    ours = generate_reference(smollm2.model, ids, max_new_tokens=32, eos_ids=tok.eos_token_ids)
    with torch.no_grad():
        hf = hf_smollm2.generate(torch.tensor([ids]), max_new_tokens=32, do_sample=False,
                                 attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 pad_token_id=tok.pad_token_id)[0, len(ids):].tolist()
    assert len(ours) == 32 and ours == hf, (tok.decode(ours), tok.decode(hf))
