"""A tiny random chat model for the `toy` suite: a word-level vocabulary of 18 tokens and a
2-layer decoder (~30k parameters). Tests, the async benchmark and the docs examples train it in
seconds per step; a random policy says the right digit ~1/18 of the time, so rewards start
neither all 0 nor all 1."""

from pathlib import Path

import torch

SPECIALS = ["<pad>", "<unk>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
WORDS = ["say", *(str(d) for d in range(10))]
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
            "{% if add_generation_prompt %}<|assistant|> {% endif %}")


def toy_tokenizer():
    from tokenizers import Tokenizer as Backend
    from tokenizers import decoders, models, pre_tokenizers

    from temper.models import Tokenizer

    vocab = {w: i for i, w in enumerate(SPECIALS + WORDS)}
    backend = Backend(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with spaces
    backend.add_special_tokens(SPECIALS)
    config = {"eos_token": "<|end|>", "pad_token": "<pad>", "unk_token": "<unk>", "chat_template": TEMPLATE}
    return Tokenizer(backend, config)


def make_toy_model(folder: str | Path, seed: int = 0, hidden: int = 32, layers: int = 2, positions: int = 256) -> Path:
    """Write the toy model and its tokenizer as a Hugging Face folder that load_model reads."""
    from temper.models import LlamaForCausalLM, ModelConfig, save_model

    tok = toy_tokenizer()
    cfg = ModelConfig(vocab_size=tok.vocab_size, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2, head_dim=hidden // 4,
                      max_position_embeddings=positions, tie_word_embeddings=True, bos_token_id=None,
                      eos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # small weights (as HF initialises): a near-uniform first policy, not a peaked one
        for _name, p in model.named_parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.02)
    return save_model(model, tok, folder)


if __name__ == "__main__":  # python -m temper.models.toy FOLDER [HIDDEN]
    import sys

    # HIDDEN 128 gives head_dim 32, the smallest vLLM's CPU attention runs (the default's 8 it refuses)
    print(make_toy_model(sys.argv[1] if len(sys.argv) > 1 else "runs/toy-model",
                         hidden=int(sys.argv[2]) if len(sys.argv) > 2 else 32))
