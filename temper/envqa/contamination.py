"""Contamination: n-gram overlap (13 words/tokens by default) between a training task and the text
of evaluation suites (their prompts, reference solutions and test payloads). Each overlap names
the evaluation task and the overlapping span (maximal run of shared n-grams)."""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from temper.envs.suite import Suite
from temper.envs.task import Task

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def task_text(task: Task) -> str:
    """What a task carries: prompt, files, reference solution, and any text of its payload."""
    parts = [task.content(), task.oracle or ""]
    parts += [v for k, v in task.payload.items() if isinstance(v, str) and k not in ("path", "name")]
    return "\n".join(parts)


@dataclass
class EvalIndex:
    n: int
    grams: dict[tuple[str, ...], str]  # n-gram -> "suite/task id" it first came from
    suites: list[str]

    @classmethod
    def build(cls, suites: Iterable[tuple[str, Suite]], n: int = 13) -> "EvalIndex":
        grams: dict[tuple[str, ...], str] = {}
        names = []
        for spec, suite in suites:
            names.append(spec)
            for t in suite.tasks():
                label = f"{spec}/{t.payload.get('task_id') or t.id}"
                toks = tokens(task_text(t))
                for i in range(len(toks) - n + 1):
                    grams.setdefault(tuple(toks[i:i + n]), label)
        return cls(n, grams, names)

    def overlaps(self, text: str, max_spans: int = 5) -> list[dict[str, Any]]:
        """Maximal spans of the text made of n-grams found in the index, longest first."""
        toks, n = tokens(text), self.n
        hits = [i for i in range(len(toks) - n + 1) if tuple(toks[i:i + n]) in self.grams]
        spans: list[tuple[int, int, str]] = []
        for i in hits:
            if spans and i <= spans[-1][1]:
                spans[-1] = (spans[-1][0], i + n, spans[-1][2])
            else:
                spans.append((i, i + n, self.grams[tuple(toks[i:i + n])]))
        spans.sort(key=lambda s: s[0] - s[1])
        return [{"source": src, "tokens": b - a, "span": " ".join(toks[a:b])[:500]} for a, b, src in spans[:max_spans]]
