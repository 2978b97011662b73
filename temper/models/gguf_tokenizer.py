"""Rebuild a `tokenizers` byte-level BPE tokenizer from the metadata of a GGUF file.

A GGUF has no `tokenizer.json`: it stores the vocabulary, the merges, each token's type and
the special token ids under llama.cpp's keys, plus `tokenizer.ggml.pre`, the name of the
pre-tokenizer (how text is split before BPE). We map that name to the split llama.cpp
uses, which is also what the model's original `tokenizer.json` did (for SmolLM2: digits
one by one, then GPT-2's regex).
"""

from typing import Any

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors

from temper.errors import TemperError
from temper.models.gguf_loader import GGUFFile

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# `tokenizer.ggml.pre` -> regexes applied in turn (llama.cpp's llama-vocab.cpp lists the same).
_PRE_SPLITS: dict[str, list[str]] = {
    "default": [_GPT2_SPLIT],
    "gpt-2": [_GPT2_SPLIT],
    "smollm": [r"\p{N}", _GPT2_SPLIT],
    "starcoder": [r"\p{N}", _GPT2_SPLIT],
    "refact": [r"\p{N}", _GPT2_SPLIT],
    "llama-bpe": [_LLAMA3_SPLIT],
    "llama3": [_LLAMA3_SPLIT],
    "smaug-bpe": [_LLAMA3_SPLIT],
    "qwen2": [_QWEN2_SPLIT],
    "deepseek-r1-qwen": [_QWEN2_SPLIT],
}
_CONTROL, _USER_DEFINED = 3, 4  # llama.cpp token types


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (the alphabet of byte-level BPE)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, extra = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(keep, chars, strict=True)}


def tokenizer_from_gguf(gguf: GGUFFile) -> tuple[Tokenizer, dict[str, Any]]:
    """(`tokenizers` backend, `tokenizer_config.json`-style dict) for the file's tokenizer."""
    meta = gguf.metadata
    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise TemperError(f"{gguf.path}: tokenizer type {kind!r} is not supported (temper reads byte-level BPE)")
    tokens = gguf.array("tokenizer.ggml.tokens") or []
    merges = gguf.array("tokenizer.ggml.merges") or []
    types = gguf.array("tokenizer.ggml.token_type") or [1] * len(tokens)
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in _PRE_SPLITS:
        raise TemperError(f"{gguf.path}: pre-tokenizer {pre!r} is not supported ({', '.join(sorted(_PRE_SPLITS))})")

    alphabet = _bytes_to_unicode()
    spelled = set(alphabet.values())
    # Tokens are stored in the byte alphabet already; respell the odd one that is not.
    vocab = {
        tok if set(tok) <= spelled else "".join(alphabet[b] for b in tok.encode("utf-8")): i
        for i, tok in enumerate(tokens)
    }
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges], fuse_unk=False)
    backend = Tokenizer(bpe)
    splits = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in _PRE_SPLITS[pre]]
    backend.pre_tokenizer = pre_tokenizers.Sequence([*splits, pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                                        use_regex=False)])
    backend.decoder = decoders.ByteLevel()
    # Control tokens (<|im_start|>) are special: matched whole and dropped by skip_special_tokens;
    # user-defined ones (<think>) are matched whole but kept in decoded text.
    backend.add_special_tokens([
        AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types, strict=True) if k == _CONTROL
    ])
    backend.add_tokens([
        AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types, strict=True) if k == _USER_DEFINED
    ])

    def token(key: str) -> str | None:
        i = meta.get(f"tokenizer.ggml.{key}")
        return tokens[i] if i is not None and 0 <= i < len(tokens) else None

    config: dict[str, Any] = {
        "bos_token": token("bos_token_id"),
        "eos_token": token("eos_token_id"),
        "unk_token": token("unknown_token_id"),
        "pad_token": token("padding_token_id"),
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": bool(meta.get("tokenizer.ggml.add_eos_token", False)),
        "chat_template": meta.get("tokenizer.chat_template"),
        "model_max_length": int(meta.get(f"{gguf.architecture}.context_length", 2048)),
    }
    backend.post_processor = bos_eos_processor(backend, config)
    return backend, config


def bos_eos_processor(backend: Tokenizer, config: dict[str, Any]) -> Any:
    """What `encode(add_special_tokens=True)` adds: BOS/EOS when the config asks, else nothing."""
    template_single, template_pair, specials = "$A", "$A $B", []
    for flag, key, before in (("add_bos_token", "bos_token", True), ("add_eos_token", "eos_token", False)):
        tok = config.get(key)
        if config.get(flag) and tok:
            template_single = f"{tok} {template_single}" if before else f"{template_single} {tok}"
            template_pair = f"{tok} {template_pair}" if before else f"{template_pair} {tok}"
            specials.append((tok, backend.token_to_id(tok)))
    if not specials:
        return processors.ByteLevel(trim_offsets=False)
    return processors.TemplateProcessing(single=template_single, pair=template_pair, special_tokens=specials)
