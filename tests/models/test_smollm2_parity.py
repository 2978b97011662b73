"""The real SmolLM2-135M-Instruct: temper's GGUF conversion + decoder against transformers' own
GGUF loader + LlamaForCausalLM (an independent path: its dequantisation, renaming and q/k
un-permutation). Needs `accelerate`, which transformers requires for GGUF files."""

import pytest
import torch

from temper.models import generate_reference
from temper.models.registry import BUNDLED

pytestmark = pytest.mark.slow

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


def test_logits_match_transformers(smollm2, hf_smollm2):
    for prompt in PROMPTS:
        ids = torch.tensor([_chat_ids(smollm2.tokenizer, prompt)])
        with torch.no_grad():
            diff = (hf_smollm2(ids).logits - smollm2.model.logits(ids)).abs().max().item()
        assert diff < 1e-3, prompt


def test_greedy_continuations_match_transformers(smollm2, hf_smollm2):
    for prompt in PROMPTS[:3]:
        ids = _chat_ids(smollm2.tokenizer, prompt)
        ours = generate_reference(smollm2.model, ids, max_new_tokens=36, eos_ids=smollm2.tokenizer.eos_token_ids)
        with torch.no_grad():
            hf = hf_smollm2.generate(torch.tensor([ids]), max_new_tokens=36, do_sample=False,
                                     attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                     pad_token_id=smollm2.tokenizer.pad_token_id)[0, len(ids):].tolist()
        assert len(ours) >= 32, smollm2.tokenizer.decode(ours)
        assert ours == hf, (smollm2.tokenizer.decode(ours), smollm2.tokenizer.decode(hf))
