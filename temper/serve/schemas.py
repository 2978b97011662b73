"""Request bodies of the OpenAI-compatible API, validated so that a bad field is a 400 naming it.

Unknown fields are ignored (clients send many optional ones); known fields are checked.
Responses are plain dicts in the OpenAI shapes (see app.py and streaming.py).
"""

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


class Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", protected_namespaces=())


class StreamOptions(Lenient):
    include_usage: bool = False  # as OpenAI: the final usage chunk only when asked


class Hints(Lenient):
    """temper extensions shared by both endpoints: routing hints and RL-level sampling knobs."""

    latency_budget_ms: float | None = Field(None, ge=0)  # routing hint for M:auto
    task_type: str | None = None  # routing hint for M:auto
    user: str | None = None  # sticky A/B key and budget key (else the API key)
    top_k: int = Field(0, ge=0)
    min_p: float = Field(0.0, ge=0, lt=1)
    repetition_penalty: float = Field(1.0, gt=0)
    ignore_eos: bool = False
    stop_token_ids: list[int] = Field(default_factory=list)
    skip_special_tokens: bool = True
    return_token_ids: bool = False  # token ids (prompt and output) and policy versions in each choice


class JsonSchemaSpec(Lenient):
    model_config = ConfigDict(extra="ignore", protected_namespaces=(), populate_by_name=True)
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None


class ResponseFormat(Lenient):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaSpec | None = None


class Sampling(Hints):
    model: str
    max_tokens: int | None = Field(None, ge=1)
    temperature: float = Field(1.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    n: int = Field(1, ge=1, le=16)
    seed: int | None = None
    stop: str | list[str] | None = None
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    frequency_penalty: float = Field(0.0, ge=-2, le=2)
    stream: bool = False
    stream_options: StreamOptions | None = None
    # Enforced while sampling (constraints.py): OpenAI's response_format, vLLM's structured_outputs.
    response_format: ResponseFormat | None = None
    structured_outputs: dict[str, Any] | None = None

    @field_validator("stop")
    @classmethod
    def _stops(cls, v: str | list[str] | None) -> list[str]:
        stops = [v] if isinstance(v, str) else list(v or [])
        if len(stops) > 4:
            raise ValueError("at most 4 stop sequences")
        if any(not s for s in stops):
            raise ValueError("stop sequences must not be empty")
        return stops


class CompletionRequest(Sampling):
    # One prompt (text or token ids) or a batch of them, as the OpenAI API allows.
    prompt: str | list[int] | list[str] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False

    @field_validator("prompt")
    @classmethod
    def _not_empty(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("prompt is empty")
        if isinstance(v, list) and isinstance(v[0], list) and any(not p for p in v):
            raise ValueError("a prompt in the batch is empty")
        return v

    # vLLM's: each prompt token's logprob (and this many alternatives) as {token_id: {"logprob", ...}}
    prompt_logprobs: int | None = Field(None, ge=0, le=20)
    # OpenAI's max_tokens: 0 (with echo: score the prompt, generate nothing) is allowed here
    max_tokens: int | None = Field(None, ge=0)

    def echo_problem(self) -> tuple[str, str] | None:
        """(field, why) when echo and max_tokens do not go together."""
        if self.max_tokens == 0 and not self.echo:
            return "max_tokens", "max_tokens: 0 needs echo: true (nothing would be returned)"
        if self.echo and self.stream:
            return "echo", "echo with stream is not supported; ask without stream"
        return None

    @property
    def scores_prompt(self) -> bool:
        return self.prompt_logprobs is not None or (self.echo and self.logprobs is not None)

    def prompts(self) -> list[str | list[int]]:
        p = self.prompt
        if isinstance(p, str) or (p and isinstance(p[0], int)):
            return [p]  # type: ignore[list-item]
        return list(p)  # type: ignore[arg-type]


class TextPart(Lenient):
    type: Literal["text"]
    text: str


class FunctionCall(Lenient):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCallIn(Lenient):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(Lenient):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content)
        return self.content or ""

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts_only(cls, v: Any) -> Any:
        # An image (or audio) part gets one line saying why, not pydantic's three about the union's members.
        for i, part in enumerate(v if isinstance(v, list) else []):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind != "text":
                raise ValueError(f"part {i} is of type {kind!r}: this model reads text only (parts of type 'text')")
        return v

    @model_validator(mode="after")
    def _has_content(self) -> "Message":
        if self.content is None and not (self.role == "assistant" and self.tool_calls):
            raise ValueError("content is required (except for an assistant message with tool_calls)")
        return self


class FunctionSpec(Lenient):
    name: str = Field(min_length=1)
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class ToolSpec(Lenient):
    type: Literal["function"] = "function"
    function: FunctionSpec


class ChatRequest(Sampling):
    messages: list[Message] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    max_completion_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _checks(self) -> "ChatRequest":
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        if isinstance(self.tool_choice, str) and self.tool_choice not in ("none", "auto", "required"):
            raise ValueError("tool_choice must be 'none', 'auto', 'required' or a function")
        return self


class LoadWeightsRequest(Lenient):
    path: str = Field(min_length=1)  # a checkpoint folder (safetensors + config.json) on the server's disk
    version: int = Field(ge=0)


def error_body(message: str, param: str | None = None, kind: str = "invalid_request_error",
               code: str | None = None) -> dict[str, Any]:
    """The OpenAI error shape: {"error": {"message", "type", "param", "code"}}."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def describe_validation(errors: list[dict[str, Any]]) -> tuple[str, str | None]:
    """pydantic/FastAPI validation errors -> (one message naming each field, the first field)."""
    parts, first = [], None
    for err in errors:
        if err.get("type") == "json_invalid":
            return f"the body is not valid JSON ({err.get('ctx', {}).get('error', 'decode error')})", "body"
        loc = [str(p) for p in err.get("loc", ()) if p != "body"]
        # Drop union-branch markers (e.g. 'str', 'list[int]') that pydantic adds to the location.
        loc = [p for p in loc if not (p.startswith(("list[", "str", "int", "function-", "tagged-union")))]
        field = ".".join(loc) or "body"
        first = first or field
        msg = err.get("msg", "invalid").removeprefix("Value error, ")
        parts.append(f"{field}: {msg}")
    seen: list[str] = []
    for p in parts:  # unions report one error per branch: keep each line once
        if p not in seen:
            seen.append(p)
    return "; ".join(seen[:4]), first
