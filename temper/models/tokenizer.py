"""The tokenizer: a `tokenizers` backend plus the special tokens and the chat template.

Loads from a Hugging Face folder (`tokenizer.json`, `tokenizer_config.json`, optional
`chat_template.jinja`, `generation_config.json`) or from a GGUF file's metadata, and saves
back to a folder that transformers' `AutoTokenizer` reads.
"""

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer as Backend

from temper.errors import TemperError
from temper.models.chat_template import render_chat

# Tokens that end a turn or a document in common chat vocabularies: generation stops at any
# of them that the vocabulary has, besides the configured EOS (SmolLM2: <|im_end|> and <|endoftext|>).
_STOP_TOKENS = ("<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>", "<|end|>",
                "<end_of_turn>", "</s>")
_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token")


class Tokenizer:
    def __init__(self, backend: Backend, config: dict[str, Any], extra_eos_ids: list[int] | None = None):
        self.backend = backend
        # tokenizer_config.json may spell a special token as a string or as {"content": ...}
        self.config = {k: (v.get("content") if isinstance(v, dict) and k in _SPECIAL_KEYS else v)
                       for k, v in config.items()}
        self.chat_template: str | None = _pick_template(self.config.get("chat_template"))
        eos = self.config.get("eos_token")
        self.eos_token_id: int = self._id_of(eos) if eos else _first_present(backend, _STOP_TOKENS)
        self.bos_token_id: int | None = self._id_of(self.config["bos_token"]) if self.config.get("bos_token") else None
        pad = self.config.get("pad_token")
        self.pad_token_id: int = self._id_of(pad) if pad else self.eos_token_id
        specials = {t.content for t in backend.get_added_tokens_decoder().values() if t.special}
        stops = {backend.token_to_id(t) for t in _STOP_TOKENS if t in specials}
        self.eos_token_ids: set[int] = {self.eos_token_id, *(extra_eos_ids or []), *stops} - {None}

    # ---- loading and saving -------------------------------------------------------------
    @classmethod
    def from_folder(cls, folder: str | Path) -> "Tokenizer":
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise TemperError(f"{path}: no such file (temper needs a tokenizer.json)")
        try:
            backend = Backend.from_file(str(path))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise TemperError(f"{path}: not a readable tokenizer ({exc})") from None
        config = _read_json(folder / "tokenizer_config.json")
        jinja = folder / "chat_template.jinja"
        if jinja.is_file():  # transformers >= 4.50 saves the template beside the config
            config["chat_template"] = jinja.read_text()
        extra = []
        for name in ("generation_config.json", "config.json"):
            eos = _read_json(folder / name).get("eos_token_id")
            extra += eos if isinstance(eos, list) else [eos] if isinstance(eos, int) else []
        return cls(backend, config, extra)

    @classmethod
    def from_gguf(cls, path: str | Path) -> "Tokenizer":
        from temper.models.gguf_loader import open_gguf
        from temper.models.gguf_tokenizer import tokenizer_from_gguf

        backend, config = tokenizer_from_gguf(open_gguf(path))
        return cls(backend, config)

    def save(self, folder: str | Path) -> None:
        """Write tokenizer.json, tokenizer_config.json and chat_template.jinja (transformers' layout)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.backend.save(str(folder / "tokenizer.json"))
        config = {k: v for k, v in self.config.items() if k != "chat_template" and v is not None}
        config.setdefault("tokenizer_class", "PreTrainedTokenizerFast")
        (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")
        if self.chat_template is not None:
            (folder / "chat_template.jinja").write_text(self.chat_template)

    # ---- text <-> ids ---------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """Token ids; `add_special_tokens` adds what the tokenizer's post-processor adds (e.g. BOS)."""
        return self.backend.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self.backend.id_to_token(token_id)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """bos/eos/unk/pad token strings, as chat templates receive them."""
        return {k: self.config[k] for k in _SPECIAL_KEYS if self.config.get(k)}

    def apply_chat_template(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = False,
        tokenize: bool = False,
        **kwargs: Any,
    ) -> str | list[int]:
        """Render `messages` with the model's template; with `tokenize`, return ids (no extra specials)."""
        if self.chat_template is None:
            raise TemperError("this tokenizer has no chat template (the model is not a chat model)")
        text = render_chat(self.chat_template, messages, tools=tools, add_generation_prompt=add_generation_prompt,
                           special_tokens=self.special_tokens_map, **kwargs)
        # The template already writes every special token it wants, so nothing is added on top.
        return self.encode(text, add_special_tokens=False) if tokenize else text

    def _id_of(self, token: str) -> int:
        token_id = self.backend.token_to_id(token)
        if token_id is None:
            raise TemperError(f"tokenizer: special token {token!r} is not in the vocabulary")
        return token_id


def _pick_template(value: Any) -> str | None:
    # tokenizer_config.json may hold a list of named templates; "default" is the chat one.
    if isinstance(value, list):
        named = {t.get("name"): t.get("template") for t in value if isinstance(t, dict)}
        return named.get("default") or next(iter(named.values()), None)
    return value


def _first_present(backend: Backend, tokens: tuple[str, ...]) -> int:
    for t in tokens:
        if (i := backend.token_to_id(t)) is not None:
            return i
    raise TemperError("tokenizer: no eos_token configured and no known end-of-text token in the vocabulary")


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TemperError(f"{path}: invalid JSON ({exc})") from None
    return data if isinstance(data, dict) else {}
