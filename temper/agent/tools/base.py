"""Tools: typed Python functions whose JSON schema (OpenAI `tools` format) comes from the signature.

    @tool
    async def lookup(word: str, limit: int = 3) -> str:
        '''Look a word up in the dictionary.

        Args:
            word: the word to look up
            limit: most senses to return
        '''

A parameter named `ctx` receives the ToolContext (the episode's environment and sandbox) and is
not part of the schema. Arguments are checked against the schema before the call, so a bad call
becomes an error message for the model, never an exception in the episode.
"""

import inspect
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", list: "array", dict: "object"}


@dataclass
class ToolContext:
    env: Any = None  # the episode's Environment
    state: dict[str, Any] = field(default_factory=dict)  # per-episode scratch (e.g. the submitted answer)
    # A sandbox command's own timeout is at most `timeout_s` (agent.tool_timeout_s) and ends by `deadline`
    # (time.monotonic() of the episode's end); `pending`: sandbox calls still running (a cancelled tool's),
    # which the episode waits for before its verifier uses the sandbox (temper.agent.tools.builtin).
    timeout_s: float | None = None
    deadline: float | None = None
    pending: set[Any] = field(default_factory=set)

    @property
    def sandbox(self) -> Any:
        sb = getattr(self.env, "sandbox", None)
        if sb is None:
            raise ToolError("this environment has no sandbox, so this tool is unavailable")
        return sb


class ToolError(Exception):
    """A tool failed because of its input or the task's state: shown to the model as an error."""


def _schema(tp: Any) -> dict[str, Any]:
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _schema(inner[0]) if len(inner) == 1 else {"anyOf": [_schema(a) for a in inner]}
    if origin is Literal:
        return {"type": _JSON.get(type(args[0]), "string"), "enum": list(args)}
    if origin in (list, tuple, set):
        return {"type": "array", **({"items": _schema(args[0])} if args else {})}
    if origin is dict:
        return {"type": "object"}
    return {"type": _JSON.get(tp, "string")}


def _arg_docs(doc: str) -> dict[str, str]:
    out, in_args = {}, False
    for line in doc.splitlines():
        if line.strip().lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
        elif in_args and (m := re.match(r"\s+(\w+)\s*(?:\([^)]*\))?:\s*(.+)", line)):
            out[m.group(1)] = m.group(2).strip()
        elif in_args and line.strip() and not line.startswith((" ", "\t")):
            in_args = False
    return out


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    wants_ctx: bool = False

    @property
    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry."""
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}

    def check(self, args: Any) -> str | None:
        """What is wrong with `args` for this tool, or None."""
        if not isinstance(args, dict):
            return f"the arguments of {self.name} must be a JSON object, not {type(args).__name__}"
        props, required = self.parameters["properties"], self.parameters.get("required", [])
        problems = [f"missing argument {k!r}" for k in required if k not in args]
        problems += [f"unknown argument {k!r}" for k in args if k not in props]
        for k, v in args.items():
            if k in props and (why := _type_problem(v, props[k])):
                problems.append(f"argument {k!r} {why}")
        if not problems:
            return None
        return f"bad arguments for {self.name}: {'; '.join(problems)} (expected: {_signature(self)})"

    async def __call__(self, ctx: ToolContext, args: dict[str, Any]) -> str:
        out = self.fn(ctx, **args) if self.wants_ctx else self.fn(**args)
        if inspect.isawaitable(out):
            out = await out
        return out if isinstance(out, str) else str(out)


def _type_problem(v: Any, spec: dict[str, Any]) -> str | None:
    if "enum" in spec and v not in spec["enum"]:
        return f"must be one of {spec['enum']}"
    t = spec.get("type")
    ok = {"string": isinstance(v, str), "integer": isinstance(v, int) and not isinstance(v, bool),
          "number": isinstance(v, int | float) and not isinstance(v, bool), "boolean": isinstance(v, bool),
          "array": isinstance(v, list), "object": isinstance(v, dict)}.get(t, True)
    return None if ok else f"must be a {t}, not {type(v).__name__}"


def _signature(t: Tool) -> str:
    req = set(t.parameters.get("required", []))
    parts = [f"{k}: {p.get('type', 'any')}{'' if k in req else ' (optional)'}"
             for k, p in t.parameters["properties"].items()]
    return f"{t.name}({', '.join(parts)})"


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None) -> Any:
    """Make a Tool of a function; its docstring's first paragraph is the description."""

    def make(f: Callable[..., Any]) -> Tool:
        hints = get_type_hints(f)
        doc = inspect.getdoc(f) or ""
        arg_docs = _arg_docs(doc)
        props: dict[str, Any] = {}
        required: list[str] = []
        wants_ctx = False
        for pname, p in inspect.signature(f).parameters.items():
            if pname == "ctx":
                wants_ctx = True
                continue
            props[pname] = _schema(hints.get(pname, str))
            if pname in arg_docs:
                props[pname]["description"] = arg_docs[pname]
            if p.default is inspect.Parameter.empty:
                required.append(pname)
        description = doc.split("\n\n")[0].strip() or (name or f.__name__)
        return Tool(name or f.__name__, description, {"type": "object", "properties": props, "required": required},
                    f, wants_ctx)

    return make(fn) if fn is not None else make

