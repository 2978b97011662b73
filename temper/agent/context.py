"""Context management for long episodes, within a token budget that is never exceeded.

Layers, in order: the system prompt and the environment's stable background (identical across
episodes of a suite, so the engine's prefix cache shares it), the task, then the dynamic history.
Tool outputs are trimmed to keep their head and tail with the cut marked. When the history no
longer fits, the window is compacted (`ContextConfig.compaction`): old turns become a summary and the
last few are kept (summary), or every turn's own messages are kept and only old tool outputs give way
to a placeholder (observation_masking: cheap, and the agent's record of what it did and found stays
verbatim); the task is restated at the end. The loop then continues in a new context window (a new
trajectory segment), since tokens already generated are never re-tokenized in place.
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


def trim(tok: Any, text: str, max_tokens: int) -> str:
    """Keep the head and tail of `text` within about `max_tokens` of `tok`'s, marking the cut."""
    ids = tok.encode(text)
    if len(ids) <= max_tokens:
        return text
    keep = max(max_tokens - 16, 8)
    head, tail = tok.decode(ids[: keep // 2]), tok.decode(ids[-(keep - keep // 2):])
    cut = len(text) - len(head) - len(tail)
    return f"{head}\n[... {cut} characters cut ...]\n{tail}"


def masked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A turn's messages with everything but the agent's own replaced by a placeholder (observation masking)."""
    return [m if m["role"] == "assistant" else {**m, "content": f"[earlier output omitted: {len(m['content'])} "
                                                                 "characters]"} for m in messages]


class ContextManager:
    def __init__(self, fmt: ChatFormat, budget: int, config: ContextConfig | None = None,
                 summarizer: Summarizer | None = None) -> None:
        self.fmt, self.budget = fmt, budget
        self.cfg = config or ContextConfig()
        self.summarizer = summarizer or extractive_summary

    def tokens(self, text: str) -> int:
        return len(self.fmt.tok.encode(text))

    def trim(self, text: str, max_tokens: int) -> str:
        return trim(self.fmt.tok, text, max_tokens)

    def initial(self, system: str, task: str) -> list[dict[str, Any]]:
        return [self.fmt.system_message(system), {"role": "user", "content": task}]

    def prefix_len(self, messages: list[dict[str, Any]]) -> int:
        """Tokens of the system layer: the part every episode of the suite shares."""
        return len(self.fmt.tok.encode(self.fmt.render(messages[:1], gen=False)))

    def reminder(self, task: str) -> str:
        return f"Reminder of your task (the context is getting long):\n{self.trim(task, 256)}"

    def should_restate(self, used: int) -> bool:
        return used >= self.cfg.restate_at * self.budget

    async def compact(self, system: str, task: str, turns: list[TurnNote], last: dict[str, Any],
                      reply: dict[str, Any] | None = None) -> list[dict]:
        """A new, smaller window: system, task, the older turns (a summary, or with observation_masking their
        own messages with outputs masked and only the oldest summarised), recent turns verbatim, the agent's
        latest `reply` and `last` (what came back to it) with the task restated. Fewer recent turns, then
        more summarised, until it fits."""
        base = self.initial(system, task)
        limit = self.budget - self.cfg.reserve_tokens
        latest = self.trim(last["content"], self.cfg.max_observation_tokens // 2)
        if reply:
            reply = {**reply, "content": self.trim(reply["content"], self.cfg.max_observation_tokens // 2)}
        tail = [*([reply] if reply else []),
                {"role": "user", "content": f"Latest result:\n{latest}\n\n{self.reminder(task)}"}]
        # A summarizer that generates (ModelSummarizer.generates) is called once per compaction: the shape is
        # chosen with room for its longest summary; a cheap one is tried on every shape, so it fits exactly.
        generates = getattr(self.summarizer, "generates", False)
        summaries: dict[int, str] = {}  # by how many turns they cover

        async def summary(n: int, draft: bool = False) -> list[dict[str, Any]]:
            if n == 0:
                return []
            if draft and generates:
                text = ""
            else:
                if n not in summaries:
                    summaries[n] = self.trim(await self.summarizer(turns[:n]), self.cfg.summary_max_tokens)
                text = summaries[n]
            return [{"role": "user", "content": f"Summary of your earlier turns:\n{text}"},
                    {"role": "assistant", "content": "Understood. I will continue from there."}]

        for keep in range(min(self.cfg.keep_recent_turns, len(turns)), -1, -1):
            old = len(turns) - keep
            recent = [m for t in turns[old:] for m in t.messages]
            cuts = range(old + 1) if self.cfg.compaction == "observation_masking" else (old,)
            for cut in cuts:  # turns[:cut] summarised, turns[cut:old] masked
                kept = [m for t in turns[cut:old] for m in masked(t.messages)]
                room = self.cfg.summary_max_tokens + 8 if generates and cut else 0
                draft = [*base, *await summary(cut, draft=True), *kept, *recent, *tail]
                if len(self.fmt.prompt_ids(draft)) + room > limit:
                    continue
                if not (generates and cut):
                    return draft  # its summary, if any, is the real one
                msgs = [*base, *await summary(cut), *kept, *recent, *tail]
                if len(self.fmt.prompt_ids(msgs)) <= limit:
                    return msgs
        # Even the bare layers do not fit: shrink the task itself as a last resort.
        return [base[0], {"role": "user", "content": self.trim(task, max(limit // 4, 32))}]
