"""Reward for capitals.jsonl: called as score(completion, example) for each episode."""

import re


def score(completion: str, example: dict) -> dict[str, float]:
    words = re.findall(r"[A-Za-z]+", completion)
    correct = float(example["answer"] in words)
    concise = float(len(words) <= 20)
    # "reward" is the value; the other keys are reported as components.
    return {"reward": correct * (0.9 + 0.1 * concise), "correct": correct, "concise": concise}
