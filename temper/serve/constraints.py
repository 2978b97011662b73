"""The constraint a request's fields ask for, as the engine's StructuredOutputs.

- `tool_choice: "required"` or a named function: the answer is one or more tool calls (a named
  one: exactly that call) in the Hermes format the chat template teaches (`<tool_call>\\n{"name":
  ..., "arguments": {...}}\\n</tool_call>`), the arguments valid against the tool's parameters; so
  `split_tool_calls` always finds the call. `parallel_tool_calls: false` stops after the first.
- `response_format`: `json_object` (any JSON object) or `json_schema` (`strict` or not: the schema
  is enforced either way, as vLLM does);
- vLLM's `structured_outputs` (`json`, `json_object`, `regex`, `choice`, `grammar`, `structural_tag`).

A forced tool call wins over `response_format`; asking for two of these at once is refused.
`temper serve` bounds a constraint's size and nesting before compiling it (`check_limits`).
"""

import json

from pydantic import Field

from temper.agent.tools.base import Tool
from temper.config import ConfigModel
from temper.generation import RequestError, StructuredOutputs
from temper.serve.schemas import ChatRequest, Sampling


class GrammarLimits(ConfigModel):
    """Limits on a request's constraint (response_format, tool_choice, structured_outputs), checked before it
    compiles; compiling runs off the engine's thread. Beyond a limit: 400 naming the field."""

    max_bytes: int = Field(65536, ge=1)  # the schema's, regex's or grammar's text
    # bracket nesting ({[( ) of that text; xgrammar's compile time grows about with its cube
    max_depth: int = Field(64, ge=1)
    compile_timeout_s: float = Field(10.0, gt=0)


class ConstraintError(ValueError):
    def __init__(self, field: str, why: str):
        super().__init__(f"{field}: {why}")
        self.field = field


def structured_for(body: Sampling, tools: list[Tool]) -> tuple[StructuredOutputs | None, str]:
    """The request's constraint and the field it came from; ConstraintError naming the field at fault."""
    forced = _forced_tool_calls(body, tools) if isinstance(body, ChatRequest) else None
    asked = [name for name in ("response_format", "structured_outputs") if _asks(body, name)]
    if len(asked) > 1:
        raise ConstraintError(asked[1], f"give either {asked[0]} or {asked[1]}, not both")
    if forced is not None:
        return forced, "tool_choice"
    if body.structured_outputs is not None:
        try:
            return StructuredOutputs.from_dict(body.structured_outputs, "structured_outputs"), "structured_outputs"
        except RequestError as exc:
            raise ConstraintError("structured_outputs", str(exc).removeprefix("structured_outputs")
                                  .lstrip(".: ")) from None
    fmt = body.response_format
    if fmt is None or fmt.type == "text":
        return None, ""
    if fmt.type == "json_object":
        return StructuredOutputs(json_object=True), "response_format"
    if fmt.json_schema is None or fmt.json_schema.schema_ is None:
        raise ConstraintError("response_format.json_schema", "json_schema.schema is required for type json_schema")
    return StructuredOutputs(json=json.dumps(fmt.json_schema.schema_)), "response_format"


def check_limits(so: StructuredOutputs, field: str, max_bytes: int, max_depth: int) -> None:
    """ConstraintError naming `field` when the constraint is over serve's `grammar.max_bytes` or `max_depth`."""
    size, depth = so.size_and_depth()
    if size > max_bytes:
        raise ConstraintError(field, f"the constraint is {size} bytes, over this server's limit of "
                              f"{max_bytes} (grammar.max_bytes)")
    if depth > max_depth:
        raise ConstraintError(field, f"the constraint nests {depth} deep, over this server's limit of "
                              f"{max_depth} (grammar.max_depth)")


def _asks(body: Sampling, name: str) -> bool:
    value = getattr(body, name)
    return value is not None and not (name == "response_format" and value.type == "text")


def _forced_tool_calls(body: ChatRequest, tools: list[Tool]) -> StructuredOutputs | None:
    choice = body.tool_choice
    if choice in (None, "auto", "none"):
        return None
    if not tools:
        raise ConstraintError("tool_choice", f"{json.dumps(choice)} needs tools")
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name") or choice.get("name")
        chosen = [t for t in tools if t.name == name]
        if not chosen:
            raise ConstraintError("tool_choice", f"no tool named {name!r} is offered "
                                  f"(tools: {', '.join(t.name for t in tools)})")
        tools, first_only = chosen, True
    else:
        first_only = not body.parallel_tool_calls
    call = {"anyOf": [{"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                       "properties": {"name": {"const": t.name}, "arguments": t.parameters}} for t in tools]}
    tag = {"type": "structural_tag", "format": {
        "type": "tags_with_separator", "separator": "\n", "at_least_one": True, "stop_after_first": first_only,
        "tags": [{"type": "tag", "begin": "<tool_call>\n", "end": "\n</tool_call>",
                  # at most one space in a row: `{"name": ..., "arguments": {...}}` as json.dumps writes it,
                  # never the endless whitespace a small model at T=1 drifts into
                  "content": {"type": "json_schema", "json_schema": call if len(tools) > 1 else call["anyOf"][0],
                              "max_whitespace_cnt": 1}}]}}
    return StructuredOutputs(structural_tag=json.dumps(tag))
