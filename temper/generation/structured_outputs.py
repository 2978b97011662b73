"""A constraint on what a request may generate, enforced while sampling (vLLM's `structured_outputs`).

Exactly one of the fields is set:
- `json`: a JSON schema (as JSON text): the output is one JSON value that validates against it;
- `json_object`: any JSON object;
- `regex`: text matching the regular expression, whole;
- `choice`: exactly one of these strings;
- `grammar`: an EBNF grammar (xgrammar's GBNF dialect, `root ::= ...`);
- `structural_tag`: an xgrammar structural tag (JSON text), e.g. tool calls in a model's own format.

The engine compiles it once per request and keeps each sample's tokens inside it; the
sampled distribution (and so each token's logprob) is the model's, renormalised over the
tokens the constraint allows at that point.
"""

import json as json_lib
from dataclasses import dataclass, fields
from typing import Any

from temper.generation.sampling_params import RequestError


@dataclass(frozen=True)
class StructuredOutputs:
    json: str | None = None
    json_object: bool = False
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    grammar: str | None = None
    structural_tag: str | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: str) -> "StructuredOutputs":
        """From vLLM's `structured_outputs` body (json may be a schema object); RequestError naming `where`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known - {"disable_any_whitespace", "whitespace_pattern"})
        if unknown:
            raise RequestError(f"{where}.{unknown[0]}: unknown constraint (one of {', '.join(sorted(known))})")
        values = dict(data)
        for name in ("json", "structural_tag"):
            if values.get(name) is not None and not isinstance(values[name], str):
                values[name] = json_lib.dumps(values[name])
        if values.get("choice") is not None:
            if not isinstance(values["choice"], list) or not values["choice"] \
                    or not all(isinstance(c, str) for c in values["choice"]):
                raise RequestError(f"{where}.choice: must be a non-empty list of strings")
            values["choice"] = tuple(values["choice"])
        out = cls(**{k: v for k, v in values.items() if k in known})
        out.validate(where)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The `structured_outputs` body vLLM and temper serve take (the inverse of from_dict)."""
        return {name: list(v) if isinstance(v := getattr(self, name), tuple) else v for name in self._given()}

    def _given(self) -> list[str]:
        return [f.name for f in fields(self) if getattr(self, f.name) not in (None, False)]

    def size_and_depth(self) -> tuple[int, int]:
        """The constraint's text length (bytes) and its deepest bracket nesting ({[( outside JSON strings):
        what a server bounds before compiling, since compile time grows about with the depth cubed."""
        text = "\n".join(self.choice) if self.choice is not None else (
            self.json or self.regex or self.grammar or self.structural_tag or "")
        depth = deepest = 0
        in_string = escaped = False
        quoted = self.json is not None or self.structural_tag is not None  # JSON text: skip its strings
        for ch in text:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif quoted and ch == '"':
                in_string = not in_string
            elif in_string:
                continue
            elif ch in "{[(":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "}])":
                depth = max(0, depth - 1)
        return len(text.encode()), deepest

    @property
    def kind(self) -> str:
        set_ = self._given()
        return set_[0] if len(set_) == 1 else ""

    def validate(self, where: str) -> None:
        set_ = self._given()
        if len(set_) != 1:
            raise RequestError(f"{where}: exactly one of json, json_object, regex, choice, grammar, structural_tag "
                               f"must be set (got {', '.join(set_) or 'none'})")
        if self.json is not None:
            try:
                schema = json_lib.loads(self.json)
            except ValueError as exc:
                raise RequestError(f"{where}.json: not valid JSON ({exc})") from None
            if not isinstance(schema, dict | bool):
                raise RequestError(f"{where}.json: a JSON schema is an object (got {type(schema).__name__})")
