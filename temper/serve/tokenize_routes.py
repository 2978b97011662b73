"""vLLM's tokenizer routes, with its request and response shapes: `POST /tokenize` (a text prompt,
or chat messages through the chat template exactly as /v1/chat/completions renders them),
`POST /detokenize` and `GET /tokenizer_info` (lm-eval's remote tokenizer reads these)."""

import asyncio
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import Field, model_validator

from temper.errors import TemperError
from temper.serve.chat import chat_prompt_ids
from temper.serve.router import UnknownModel, split_model
from temper.serve.schemas import ChatRequest, Lenient, Message, ToolSpec, error_body


class TokenizeRequest(Lenient):
    model: str | None = None
    prompt: str | None = None
    messages: list[Message] | None = None
    tools: list[ToolSpec] | None = None
    add_special_tokens: bool = True  # a text prompt: the tokenizer's BOS (as /v1/completions adds it)
    add_generation_prompt: bool = True  # messages: end with the assistant's header
    return_token_strs: bool = False

    @model_validator(mode="after")
    def _one_input(self) -> "TokenizeRequest":
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of prompt and messages")
        return self


class DetokenizeRequest(Lenient):
    model: str | None = None
    tokens: list[int] = Field(default_factory=list)


def add_tokenizer_routes(app: FastAPI, served: str, tokenizer: Any, max_model_len: int) -> None:
    def unknown(model: str | None) -> JSONResponse | None:
        try:
            if model is not None:
                split_model(model, served)
        except UnknownModel as exc:
            return JSONResponse(error_body(str(exc), "model", code="model_not_found"), 404)
        return None

    @app.post("/tokenize")
    async def tokenize(body: TokenizeRequest) -> Any:
        if (bad := unknown(body.model)) is not None:
            return bad
        try:
            if body.prompt is not None:
                ids = tokenizer.encode(body.prompt, add_special_tokens=body.add_special_tokens)
            elif body.add_generation_prompt:  # the same ids a chat completion of these messages is given
                chat = ChatRequest(model=body.model or served, messages=body.messages, tools=body.tools)
                ids, _ = await asyncio.to_thread(chat_prompt_ids, tokenizer, chat)
            else:
                msgs = [m.model_dump(exclude_none=True) | {"content": m.text()} for m in body.messages or []]
                ids = list(tokenizer.apply_chat_template(msgs, add_generation_prompt=False, tokenize=True))
        except (TemperError, ValueError) as exc:
            return JSONResponse(error_body(f"{'prompt' if body.prompt is not None else 'messages'}: {exc}",
                                           "prompt" if body.prompt is not None else "messages"), 400)
        out: dict[str, Any] = {"count": len(ids), "max_model_len": max_model_len, "tokens": ids, "token_strs": None}
        if body.return_token_strs:
            out["token_strs"] = [tokenizer.id_to_token(i) for i in ids]
        return out

    @app.post("/detokenize")
    async def detokenize(body: DetokenizeRequest) -> Any:
        if (bad := unknown(body.model)) is not None:
            return bad
        for i, t in enumerate(body.tokens):
            if not 0 <= t < tokenizer.vocab_size:
                return JSONResponse(error_body(f"tokens[{i}]={t} is not a token id (vocabulary of "
                                               f"{tokenizer.vocab_size})", "tokens"), 400)
        return {"prompt": tokenizer.decode(body.tokens, skip_special_tokens=False)}

    @app.get("/tokenizer_info")
    async def tokenizer_info() -> dict[str, Any]:
        """tokenizer_config.json's fields (special tokens as strings), the class and the chat template."""
        info = {k: v for k, v in tokenizer.config.items() if _json_value(v)}
        info.setdefault("tokenizer_class", "PreTrainedTokenizerFast")  # what transformers loads tokenizer.json as
        info.setdefault("model_max_length", max_model_len)
        if tokenizer.chat_template:
            info["chat_template"] = tokenizer.chat_template
        return info


def _json_value(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool | list | dict)
