"""Pull a final answer out of a model's text: <answer> tags, then \\boxed{}, then the last line; or, for the arithmetic
suites, the number a reply commits to.

Standard library only: benchmarks/trl_grpo_side.py loads this file by its path into a venv that has no temper."""

import re

_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"-?\d+")

ANSWER_FORMAT = "Give your final answer inside <answer></answer> tags, e.g. <answer>42</answer>."


def extract_answer(text: str) -> str | None:
    """The answer the text commits to, or None when it has no recognisable final answer. A bare
    one-line text (as given to the submit tool) is taken as the answer itself."""
    if m := _ANSWER.findall(text):
        return m[-1].strip()
    if m := _BOXED.findall(text):
        return m[-1].strip()
    bare = text.strip()
    if bare and "\n" not in bare and len(bare) <= 200 and "<" not in bare:
        return bare
    return None


def lenient_number(text: str) -> str | None:
    """The number a reply commits to: the first after the last '=', else the last one in the text."""
    text = text.replace(",", "")
    if "=" in text and (m := _NUMBER.search(text.rsplit("=", 1)[1])):
        return m.group()
    found = _NUMBER.findall(text)
    return found[-1] if found else None
