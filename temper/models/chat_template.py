"""Render chat templates the way transformers' `apply_chat_template` does.

Chat templates are Jinja programs that ship with a model, so they are untrusted: they run
in jinja2's immutable sandbox, with the same settings and helpers transformers gives them
(trim_blocks, lstrip_blocks, loop controls, `raise_exception`, a `tojson` that does not
escape HTML, `strftime_now`, `{% generation %}` blocks). Same template + same inputs ->
the same string, which the tests check against transformers itself.
"""

import json
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
from jinja2.sandbox import ImmutableSandboxedEnvironment

from temper.errors import TemperError


class _Generation(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for masks; here it renders as is."""

    tags = {"generation"}  # noqa: RUF012 (jinja2 reads this class attribute)

    def parse(self, parser: Any) -> Any:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller: Any) -> str:
        return caller()


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
            sort_keys: bool = False) -> str:
    # jinja's own tojson escapes <, >, & for HTML; chat templates want plain JSON.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=16)
def compile_template(source: str) -> jinja2.Template:
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise TemperError(f"chat template: syntax error on line {exc.lineno}: {exc.message}") from None


def render_chat(
    template: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    documents: list[dict[str, Any]] | None = None,
    special_tokens: dict[str, str] | None = None,
    **kwargs: Any,
) -> str:
    """The prompt text for `messages`; extra kwargs (e.g. `enable_thinking`) reach the template."""
    # transformers drops None-valued keys first (OpenAI-style `content=None` would render "None"),
    # and copies a message's reasoning under every name templates read it by.
    plain = []
    for m in messages:
        m = {k: v for k, v in m.items() if v is not None}
        reasoning = next((m[k] for k in ("reasoning_content", "thinking", "reasoning") if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        plain.append(m)
    context = {**(special_tokens or {}), **kwargs}
    try:
        return compile_template(template).render(
            messages=plain, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt, **context
        )
    except jinja2.exceptions.TemplateError as exc:
        raise TemperError(f"chat template: {exc}") from None
