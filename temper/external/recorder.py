"""The token record of one external episode: every model call's prompt as the policy saw it and
its sampled tokens, merged into segments that become trajectories.

Nothing is re-tokenized. When a chat call's messages are the previous call's messages, then the
reply the endpoint returned, then new messages, its prompt is the previous prompt and sampled
tokens followed by only the new messages' tokens (`ChatFormat.continuation_ids`, as the built-in
loop does): the call *merges* into the segment. Rendering the whole conversation afresh would often
tokenize the model's own text differently; each time it would have is counted as *drift* (and
avoided). A call whose history was rewritten (summarised, dropped, reformatted) starts a new
segment: a *split*; segments share the episode's reward. A completions call merges when its
prompt ids extend the segment's tokens.
"""

from dataclasses import dataclass, field
from typing import Any

from temper.agent.chat_format import ChatFormat
from temper.agent.tools.base import Tool
from temper.agent.transcript import Transcript
from temper.generation import Completion
from temper.serve.chat import _message, chat_prompt_ids
from temper.serve.schemas import ChatRequest, Message


@dataclass
class CallRecord:
    api: str  # chat | completions | responses
    segment: int
    merged: bool
    prompt_tokens: int
    completion: Completion
    duration_s: float = 0.0
    constrained: str = ""  # the request field that constrained its sampling (agent.constrained_requests=mark)


@dataclass
class _LastChat:
    messages: list[dict[str, Any]]  # normalized (serve.chat._message), as the harness sent them
    reply: dict[str, Any]  # the assistant message returned, normalized the same way
    tools: list[dict[str, Any]]


@dataclass
class Recorder:
    tokenizer: Any
    segments: list[Transcript] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    merges: int = 0
    splits: int = 0
    drift: int = 0
    _last: _LastChat | None = None
    _drifted: bool = False  # the pending chat call's (counted once it is recorded, not if it is refused)

    def chat_prompt(self, req: ChatRequest) -> tuple[list[int], list[Tool], bool]:
        """The prompt ids for a chat request, its tools, and whether it extends the current segment."""
        full, tools = chat_prompt_ids(self.tokenizer, req)
        self._drifted = False
        messages = [_message(m) for m in req.messages]
        last, seg = self._last, self.segments[-1] if self.segments else None
        n = len(last.messages) if last else 0
        if (last is None or seg is None or last.tools != _tools_key(req) or len(messages) <= n
                or messages[:n] != last.messages or messages[n] != last.reply):
            return full, tools, False
        model_ids = self.calls[-1].completion.token_ids
        ids = seg.token_ids + ChatFormat(self.tokenizer).continuation_ids(messages[n + 1:], model_ids)
        self._drifted = ids != full  # a fresh render would have re-tokenized the conversation differently
        return ids, tools, True

    def completion_prompt(self, ids: list[int]) -> bool:
        """Whether a completions prompt extends the current segment (its ids start with the segment's)."""
        seg = self.segments[-1] if self.segments else None
        if seg is not None and ids[:len(seg)] == seg.token_ids and len(ids) >= len(seg):
            return True
        if seg is not None:
            text, prev = self.tokenizer.decode(ids), self.tokenizer.decode(seg.token_ids)
            self.drift += text.startswith(prev)  # the same text, other tokens: the harness re-tokenized
        return False

    def record(self, api: str, prompt_ids: list[int], c: Completion, extends: bool, duration_s: float,
               req: ChatRequest | None = None, reply: dict[str, Any] | None = None, constrained: str = "") -> None:
        if req is not None:
            self.drift += self._drifted
            self._drifted = False
        if extends:
            seg = self.segments[-1]
            seg.add_context(prompt_ids[len(seg):])
            self.merges += 1
        else:
            if self.segments:
                self.splits += 1
            seg = Transcript()
            seg.add_context(prompt_ids)
            self.segments.append(seg)
        seg.add_model(c)
        self.calls.append(CallRecord(api, len(self.segments) - 1, extends, len(prompt_ids), c, duration_s,
                                     constrained))
        self._last = None
        if req is not None and reply is not None:
            self._last = _LastChat([_message(m) for m in req.messages], _message(Message.model_validate(reply)),
                                   _tools_key(req))

    def constrained(self, segment: int) -> list[str]:
        """The constraint fields of a segment's calls (empty: every token was sampled unconstrained)."""
        return sorted({c.constrained for c in self.calls if c.segment == segment and c.constrained})

    def stats(self) -> dict[str, int]:
        return {"calls": len(self.calls), "segments": len(self.segments), "merges": self.merges,
                "splits": self.splits, "retokenization_drift": self.drift}


def _tools_key(req: ChatRequest) -> list[dict[str, Any]]:
    return [t.model_dump() for t in req.tools or []] if req.tool_choice != "none" else []
