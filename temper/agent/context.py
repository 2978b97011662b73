"""Context management for long episodes, within a token budget that is never exceeded.

Layers, in order: the system prompt and the environment's stable background (identical across
episodes of a suite, so the engine's prefix cache shares it), the task, then the dynamic history.
Tool outputs are trimmed to keep their head and tail with the cut marked. When the history no
longer fits, the window is compacted: old turns become a summary, the last few are kept, and the
task is restated at the end; the loop then continues in a new context window (a new trajectory
segment), since tokens already generated are never re-tokenized in place.
"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from temper.agent.chat_format import ChatFormat
from temper.agent.config import ContextConfig

SYSTEM_PROMPT = ("You are an agent that solves tasks step by step: plan, act with the tools, read their "
                 "results, and fix your mistakes. When you are done, give the final answer.")


@dataclass
class TurnNote:
    """What one turn did, for summaries: the model's text, its tool calls and what came back."""

    text: str
    calls: list[str] = field(default_factory=list)
    observation: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)  # the turn's messages, verbatim


Summarizer = Callable[[list[TurnNote]], Awaitable[str]]


async def extractive_summary(turns: list[TurnNote]) -> str:
    """A summary without a model: one line per turn (what was called, how it went)."""
    lines = []
    for i, t in enumerate(turns, 1):
        what = "; ".join(t.calls) if t.calls else (t.text.strip().splitlines() or ["(no text)"])[0][:160]
        result = (t.observation.strip().splitlines() or [""])[0][:120]
        lines.append(f"- turn {i}: {what}" + (f" -> {result}" if result else ""))
    return "\n".join(lines)


class ContextManager:
    def __init__(self, fmt: ChatFormat, budget: int, config: ContextConfig | None = None,
                 summarizer: Summarizer | None = None) -> None:
        self.fmt, self.budget = fmt, budget
        self.cfg = config or ContextConfig()
        self.summarizer = summarizer or extractive_summary

    def tokens(self, text: str) -> int:
        return len(self.fmt.tok.encode(text))

    def trim(self, text: str, max_tokens: int) -> str:
        """Keep the head and tail of `text` within about `max_tokens`, marking the cut."""
        ids = self.fmt.tok.encode(text)
        if len(ids) <= max_tokens:
            return text
        keep = max(max_tokens - 16, 8)
        head, tail = self.fmt.tok.decode(ids[: keep // 2]), self.fmt.tok.decode(ids[-(keep - keep // 2):])
        cut = len(text) - len(head) - len(tail)
        return f"{head}\n[... {cut} characters cut ...]\n{tail}"

    def initial(self, system: str, task: str) -> list[dict[str, Any]]:
        return [self.fmt.system_message(system), {"role": "user", "content": task}]

    def prefix_len(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of the system layer: the part every episode of the suite shares."""
        return len(self.fmt.tok.encode(self.fmt.render(messages[:1], gen=False)))

    def reminder(self, task: str) -> str:
        return f"Reminder of your task (the context is getting long):\n{self.trim(task, 256)}"

    def should_restate(self, used: int) -> bool:
        return used >= self.cfg.restate_at * self.budget

    async def compact(self, system: str, task: str, turns: list[TurnNote], last: dict[str, Any]) -> list[dict]:
        """A new, smaller window: system, task, summary of older turns, recent turns, `last`
        (the newest observation) with the task restated. Fewer recent turns until it fits."""
        base = self.initial(system, task)
        limit = self.budget - self.cfg.reserve_tokens
        for keep in range(min(self.cfg.keep_recent_turns, len(turns)), -1, -1):
            old, recent = turns[: len(turns) - keep], turns[len(turns) - keep:]
            summary = self.trim(await self.summarizer(old), self.cfg.summary_max_tokens) if old else ""
            msgs = list(base)
            if summary:
                msgs += [{"role": "user", "content": f"Summary of your earlier turns:\n{summary}"},
                         {"role": "assistant", "content": "Understood. I will continue from there."}]
            for t in recent:
                msgs += t.messages
            latest = self.trim(last["content"], self.cfg.max_observation_tokens // 2)
            tail = {"role": "user", "content": f"Latest result:\n{latest}\n\n{self.reminder(task)}"}
            msgs.append(tail)
            if len(self.fmt.prompt_ids(msgs)) <= limit:
                return msgs
        # Even the bare layers do not fit: shrink the task itself as a last resort.
        return [base[0], {"role": "user", "content": self.trim(task, max(limit // 4, 32))}]
