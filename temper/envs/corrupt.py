"""Reproducible input corruption for robustness evaluation: typos, OCR-like character swaps,
garbled log lines, shuffled whitespace. Digits are never altered and indentation is kept, so
numbers in a problem and the shape of code survive; the text around them does not.
"""

import random
import re

KINDS = ("typo", "ocr", "log", "space")
_WORD = re.compile(r"[A-Za-z]{3,}")
_OCR = [("rn", "m"), ("m", "rn"), ("cl", "d"), ("l", "1"), ("I", "l"), ("O", "0"), ("o", "0"), ("e", "c"),
        ("S", "5"), ("B", "8"), ("a", "o"), ("h", "b"), ("u", "v")]
_KEYS = "qwertyuiopasdfghjklzxcvbnm"
_LOG_JUNK = "#@%&*~^|\\/<>"


def typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word) - 1)
    op = rng.randrange(4)
    if op == 0:  # swap two neighbours
        return word[:i] + word[i + 1] + word[i] + word[i + 2:]
    if op == 1:  # drop one
        return word[:i] + word[i + 1:]
    if op == 2:  # double one
        return word[:i] + word[i] + word[i:]
    j = _KEYS.find(word[i].lower())  # a neighbouring key
    sub = _KEYS[(j + rng.choice((-1, 1))) % len(_KEYS)] if j >= 0 else word[i]
    return word[:i] + sub + word[i + 1:]


def ocr(word: str, rng: random.Random) -> str:
    options = [(a, b) for a, b in _OCR if a in word]
    if not options:
        return typo(word, rng)
    a, b = rng.choice(options)
    idx = [m.start() for m in re.finditer(re.escape(a), word)]
    i = rng.choice(idx)
    return word[:i] + b + word[i + len(a):]


def garbled_log_line(rng: random.Random) -> str:
    junk = "".join(rng.choice(_LOG_JUNK + _KEYS) for _ in range(rng.randrange(8, 24)))
    return (f"[{rng.choice('WEI')} {rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
            f".{rng.randrange(1000):03d}] {rng.choice(['kernel', 'sshd', 'app', 'worker'])}: {junk}")


def corrupt(text: str, rate: float, rng: random.Random, kinds: tuple[str, ...] = KINDS) -> str:
    """Corrupt about `rate` of the words (typo/ocr), lines (log) and inner spaces (space)."""
    word_ops = [k for k in kinds if k in ("typo", "ocr")]
    out_lines = []
    for line in text.split("\n"):
        if word_ops:
            line = _WORD.sub(lambda m: (typo if rng.choice(word_ops) == "typo" else ocr)(m.group(), rng)
                             if rng.random() < rate else m.group(), line)
        if "space" in kinds:
            indent = len(line) - len(line.lstrip(" \t"))
            body = re.sub(r"(?<=\S) (?=\S)", lambda m: rng.choice(["  ", "\t", "   "]) if rng.random() < rate else " ",
                          line[indent:])
            line = line[:indent] + body
        out_lines.append(line)
        if "log" in kinds and rng.random() < rate:
            out_lines.append(garbled_log_line(rng))
    return "\n".join(out_lines)
