"""Generators of long-context tasks (RULER-style), each returning (prompt, expected answers).

- niah: one needle ("The special magic number for X is N.") at a set depth; retrieve N.
- multi_niah: several needles with different keys; retrieve all their numbers.
- vartrack: a chain of variable assignments spread through the text (multi-hop); list every
  variable that ends up holding a value.
- freq: a long list of words; name the most frequent ones (aggregation).
"""

import itertools
import random
import string

from temper.envs.haystack import insert, sentences

_KEYS = ["amber-falcon", "quiet-harbor", "silver-orchard", "crimson-lantern", "hollow-meadow", "iron-compass",
         "velvet-canyon", "frozen-willow", "golden-anvil", "rapid-heron", "misty-quarry", "bright-thistle"]
WORDS = ["apple", "breeze", "candle", "desert", "engine", "feather", "glacier", "harbor", "island", "jungle",
          "kettle", "ladder", "marble", "needle", "orbit", "pepper", "quartz", "ribbon", "saddle", "tunnel",
          "umbrella", "violin", "walnut", "yonder", "zephyr", "anchor", "basket", "cactus", "dolphin", "ember"]


_ENTRY_TOKENS = 3  # of a listed entry besides its number's digits: the space before it, the "." and the word


def number(rng: random.Random) -> str:
    return str(rng.randrange(1_000_000, 10_000_000))


def niah(rng: random.Random, length: int, depth: float, haystack: str) -> tuple[str, list[str]]:
    key, value = rng.choice(_KEYS), number(rng)
    text = insert(sentences(haystack, length, rng), [(depth, f"The special magic number for {key} is {value}.")])
    return f"{text}\n\nWhat is the special magic number for {key} mentioned in the text above?", [value]


def multi_niah(rng: random.Random, length: int, depth: float, haystack: str, needles: int) -> tuple[str, list[str]]:
    keys = rng.sample(_KEYS, min(needles, len(_KEYS)))
    values = [number(rng) for _ in keys]
    items = [(rng.random(), f"The special magic number for {k} is {v}.") for k, v in zip(keys, values, strict=True)]
    text = insert(sentences(haystack, length, rng), items)
    return (f"{text}\n\nWhat are the special magic numbers for {', '.join(keys)} mentioned in the text above? "
            "List all of them."), values


def variable(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_uppercase, k=5))


def vartrack(rng: random.Random, length: int, depth: float, haystack: str, hops: int) -> tuple[str, list[str]]:
    value = str(rng.randrange(10_000, 100_000))
    chain = [variable(rng) for _ in range(hops)]
    lines = [f"VAR {chain[0]} = {value}."] + [f"VAR {b} = VAR {a}." for a, b in itertools.pairwise(chain)]
    decoy = [variable(rng) for _ in range(2)]  # a distractor chain with another value
    lines += [f"VAR {decoy[0]} = {rng.randrange(10_000, 100_000)}.", f"VAR {decoy[1]} = VAR {decoy[0]}."]
    step = (1.0 - depth) / max(len(chain), 1)
    items = [(depth + i * step, s) for i, s in enumerate(lines[:hops])] + [(rng.random(), s) for s in lines[hops:]]
    text = insert(sentences(haystack, length, rng), items)
    return (f"{text}\n\nFollowing the VAR assignments in the text above, which variables are assigned the value "
            f"{value}? List all of them."), chain


def listed_words(tokens: int) -> int:
    """How many entries "i. word" of a numbered list fill about `tokens` tokens. Sizing by characters would
    double the list: BPE tokenizers split numbers into digits, so an entry is about its digits + ". " + a word
    (SmolLM2: ' 1234. apple' is 7 tokens in 12 characters)."""
    n = used = 0
    while used < tokens:
        n += 1
        used += len(str(n)) + _ENTRY_TOKENS
    return n


def freq(rng: random.Random, length: int, top: int) -> tuple[str, list[str]]:
    n_words = max(listed_words(length), 4 * top * 10)
    common = rng.sample(WORDS, top)
    rest = [w for w in WORDS if w not in common]
    hi = max(n_words // (2 * top), 10)
    words = [w for w in common for _ in range(hi)]
    counts = dict.fromkeys(rest, 0)
    for _ in range(n_words - len(words)):
        open_ = [w for w in rest if counts[w] < hi - 1]  # the common words stay strictly ahead
        if not open_:
            break
        w = rng.choice(open_)
        counts[w] += 1
        words.append(w)
    rng.shuffle(words)
    listing = " ".join(f"{i}. {w}" for i, w in enumerate(words, 1))
    return (f"Below is a numbered list of words.\n{listing}\n\nWhat are the {top} most frequently appearing words "
            "in the list above? List them."), common
