"""Suites by spec: `NAME` or `NAME:key=value,key=value`.

`NAME` is a registered suite (`register_suite`), an installed package's entry point in the
`temper.suites` group, or an import path `pkg.module:factory` to a user's own suite. Values
are typed by the factory's signature; a value may be a nested spec in parentheses, e.g.
`noisy:suite=(reasoning_gym:task=countdown,n=20),rate=0.05`.
"""

import importlib
import inspect
import re
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, get_type_hints

from temper.envs.suite import Suite
from temper.errors import TemperError

SuiteFactory = Callable[..., Suite]
_REGISTRY: dict[str, SuiteFactory] = {}
_BUILTIN = "temper.envs.suites"  # imported on first lookup; its modules register themselves
_IMPORT_PATH = re.compile(r"^([\w.]+):([A-Za-z_][\w.]*)(?::(.*))?$", re.S)


def register_suite(name: str) -> Callable[[SuiteFactory], SuiteFactory]:
    def deco(factory: SuiteFactory) -> SuiteFactory:
        _REGISTRY[name] = factory
        return factory

    return deco


def suite_names() -> list[str]:
    importlib.import_module(_BUILTIN)
    return sorted(_REGISTRY)


def split_args(text: str, spec: str) -> dict[str, str]:
    """`a=1,b=(x:c=2,d=3)` -> {'a': '1', 'b': 'x:c=2,d=3'}; commas inside parentheses stay."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth != 0:
        raise TemperError(f"suite spec {spec!r}: unbalanced parentheses")
    parts.append(cur)
    out: dict[str, str] = {}
    for p in (p.strip() for p in parts):
        if not p:
            continue
        key, eq, value = p.partition("=")
        if not eq or not key.strip():
            raise TemperError(f"suite spec {spec!r}: {p!r} is not key=value")
        value = value.strip()
        if value.startswith("(") and value.endswith(")"):
            value = value[1:-1]
        out[key.strip()] = value
    return out


def _registered(name: str) -> SuiteFactory | None:
    importlib.import_module(_BUILTIN)
    if name in _REGISTRY:
        return _REGISTRY[name]
    for ep in entry_points(group="temper.suites"):
        if ep.name == name:
            return ep.load()
    return None


def _unknown(name: str, spec: str) -> TemperError:
    return TemperError(f"suite spec {spec!r}: unknown suite {name!r} (known: {', '.join(sorted(_REGISTRY))}, "
                       "or an import path module:factory)")


def load_object(path: str, what: str) -> Any:
    """`pkg.module:attr` -> the object, or a one-line error naming the path."""
    mod_name, _, attr = path.partition(":")
    if not attr:
        raise TemperError(f"{what} {path!r}: expected an import path module:name")
    try:
        obj: Any = importlib.import_module(mod_name)
    except ImportError as exc:
        raise TemperError(f"{what} {path!r}: cannot import {mod_name} ({exc})") from exc
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TemperError(f"{what} {path!r}: {mod_name} has no attribute {attr}")
        obj = getattr(obj, part)
    return obj


def _coerce(value: str, annotation: Any, where: str) -> Any:
    kinds = [a for a in getattr(annotation, "__args__", (annotation,)) if a is not type(None)]
    target = kinds[0] if kinds else str
    try:
        if target is bool:
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(value)
            return value.lower() in ("true", "1", "yes")
        if target in (int, float):
            return target(value)
    except ValueError:
        raise TemperError(f"{where}={value!r} is not a valid {target.__name__}") from None
    return value


def parse_spec(spec: str) -> Suite:
    """Build the suite a spec names, with its arguments typed and checked."""
    spec = spec.strip()
    name, _, rest = spec.partition(":")
    if (factory := _registered(name)) is None:
        if not (m := _IMPORT_PATH.match(spec)) or "=" in m.group(2):
            raise _unknown(name, spec)
        factory = load_object(f"{m.group(1)}:{m.group(2)}", "suite")
        name, rest = f"{m.group(1)}:{m.group(2)}", m.group(3) or ""
    args = split_args(rest, spec)
    sig = inspect.signature(factory)
    try:
        hints = get_type_hints(factory.__init__ if inspect.isclass(factory) else factory)
    except Exception:
        hints = {}
    params = {k: p for k, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    kwargs: dict[str, Any] = {}
    for key, value in args.items():
        if key not in params:
            raise TemperError(f"suite spec {spec!r}: {name} takes no argument {key!r} (it takes: "
                              f"{', '.join(params) or 'none'})")
        kwargs[key] = _coerce(value, hints.get(key, str), f"suite spec {spec!r}: {key}")
    missing = [k for k, p in params.items() if p.default is p.empty and k not in kwargs]
    if missing:
        raise TemperError(f"suite spec {spec!r}: {name} needs {', '.join(f'{k}=...' for k in missing)}")
    suite = factory(**kwargs)
    if not isinstance(suite, Suite):
        raise TemperError(f"suite spec {spec!r}: {name} returned {type(suite).__name__}, not a Suite")
    suite.spec = spec
    return suite
