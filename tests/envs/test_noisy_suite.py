"""Noisy wrapper: reproducible corruption of what the agent sees, same verifier underneath."""

import asyncio
import random

from temper.envs.corrupt import corrupt
from temper.envs.registry import parse_spec

SPEC = "noisy:suite=(reasoning_gym:task=gsm_symbolic,n=6,seed=2),rate=0.1,seed=7"


def test_corruption_is_reproducible_and_keeps_the_verifier() -> None:
    a, b = parse_spec(SPEC), parse_spec(SPEC)
    clean = parse_spec("reasoning_gym:task=gsm_symbolic,n=6,seed=2")
    assert [t.prompt for t in a] == [t.prompt for t in b]
    changed = sum(x.prompt != y.prompt for x, y in zip(a, clean, strict=True))
    assert changed == 6
    for noisy_task, clean_task in zip(a, clean, strict=True):
        assert "noisy" in noisy_task.tags and noisy_task.id != clean_task.id
        assert noisy_task.payload == clean_task.payload
        assert asyncio.run(a.run_oracle(noisy_task)).value == 1.0


def test_each_kind_of_noise_and_what_is_kept() -> None:
    text = "def f(x):\n    return x + 12345  # adds the number\nThe quick brown fox jumps over lazy dogs."
    for kind in ("typo", "ocr", "log", "space"):
        out = corrupt(text, 0.9, random.Random(1), (kind,))
        assert out != text, kind
        assert "12345" in out and "\n    " in out  # digits and indentation survive
    assert corrupt(text, 0.0, random.Random(1)) == text
    rate_low = corrupt(text * 20, 0.02, random.Random(3), ("typo",))
    rate_high = corrupt(text * 20, 0.5, random.Random(3), ("typo",))
    diff = lambda s: sum(c1 != c2 for c1, c2 in zip(s, text * 20, strict=False))  # noqa: E731
    assert diff(rate_low) < diff(rate_high)
