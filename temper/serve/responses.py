"""One HTTP request's generation (`Job`) and the OpenAI response bodies built from its completions.

Logprobs are the engine's: log p(token) under softmax(logits / temperature) before top-k/top-p
truncation (plain softmax when greedy), the quantity an RL trainer recomputes.
"""

import time
from dataclasses import dataclass, field
from typing import Any

from temper.agent.tools.base import Tool
from temper.generation import Completion, SamplingParams, TokenEvent
from temper.serve.chat import split_tool_calls


@dataclass
class Job:
    kind: str  # chat | completion
    rid: str
    model: str  # the model name as requested (echoed back)
    tokenizer: Any
    api: str = ""  # the route that asked: chat, completions, responses, messages (for call records)
    prompts: list[list[int]] = field(default_factory=list)
    params: SamplingParams = field(default_factory=SamplingParams)
    tools: list[Tool] = field(default_factory=list)
    logprobs: int | None = None  # None: no logprobs; k: the sampled token plus k alternatives
    return_token_ids: bool = False
    content: Any = None  # the request's messages or prompt, for content logging (redacted there)
    echo: bool = False  # completions: the prompt comes first in text and logprobs (first token: null)
    echo_only: bool = False  # max_tokens 0: the one token generated is dropped
    prompt_logprobs: int | None = None  # vLLM's prompt_logprobs field in each choice
    structured_field: str = ""  # the request field its constraint came from (tool_choice, response_format, ...)
    variant: str = "standard"  # as asked (standard, fast, auto), then as routed
    record: Any = None  # the layer's own bookkeeping of the call (serve: its UsageRecord)
    headers: dict[str, str] = field(default_factory=dict)
    start: float = field(default_factory=time.perf_counter)
    created: int = field(default_factory=lambda: int(time.time()))
    ttft_s: float | None = None
    done: dict[int, Completion] = field(default_factory=dict)
    messages: dict[int, dict[str, Any]] = field(default_factory=dict)  # chat: each choice's message, built once
    version: int | None = None

    def choice_index(self, prompt_index: int, sample_index: int) -> int:
        return prompt_index * self.params.n + sample_index

    def seen(self, item: TokenEvent | Completion, prompt_index: int) -> int:
        """Note an engine event; returns its choice index."""
        if self.ttft_s is None and isinstance(item, TokenEvent):
            self.ttft_s = time.perf_counter() - self.start
        idx = self.choice_index(prompt_index, item.index)
        if isinstance(item, Completion):
            if self.echo_only:  # max_tokens 0: the prompt alone was asked for
                item.token_ids, item.logprobs, item.top_logprobs, item.versions = [], [], [], []
                item.text, item.finish_reason = "", "length"
            self.done[idx] = item
            self.version = item.version if item.version is not None else self.version
        return idx

    @property
    def error(self) -> str | None:
        return next((c.error or "generation failed" for c in self.done.values() if c.finish_reason == "error"), None)

    def counts(self) -> tuple[int, int, int]:
        """(prompt, cached prompt, completion) tokens. Samples of one prompt share it: its cached tokens
        count once (its first sample's)."""
        cached = sum(c.num_cached_prompt_tokens for i, c in self.done.items() if i % self.params.n == 0)
        return sum(len(p) for p in self.prompts), cached, sum(len(c.token_ids) for c in self.done.values())

    def usage(self) -> dict[str, Any]:
        prompt, cached, completion = self.counts()
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached}}

    def message(self, index: int) -> dict[str, Any]:
        """A chat choice's assistant message (tool calls parsed); the same object every time it is asked for,
        so that what a call record keeps is what the client got."""
        if index not in self.messages:
            content, calls = split_tool_calls(self.done[index].text, self.tools)
            self.messages[index] = {"role": "assistant", "content": content}
            if calls:
                self.messages[index]["tool_calls"] = calls
        return self.messages[index]

    # ---- bodies ---------------------------------------------------------------------------
    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], skip_special_tokens=False)

    def rl_fields(self, c: Completion) -> dict[str, Any]:
        if not self.return_token_ids:
            return {}
        return {"prompt_token_ids": c.prompt_token_ids, "token_ids": c.token_ids, "token_logprobs": c.logprobs,
                "versions": c.versions, "policy_version": c.version}

    def completion_logprobs(self, c: Completion, start: int = 0, offset: int = 0) -> dict[str, Any] | None:
        """The legacy completions shape: tokens, token_logprobs, top_logprobs, text_offset."""
        if self.logprobs is None:
            return None
        tokens = [self.token_text(t) for t in c.token_ids[start:]]
        offsets, pos = [], offset
        for t in tokens:
            offsets.append(pos)
            pos += len(t)
        tops = [{self.token_text(k): v for k, v in top.items()} for top in c.top_logprobs[start:]] \
            if self.logprobs else None
        return {"tokens": tokens, "token_logprobs": c.logprobs[start:], "top_logprobs": tops, "text_offset": offsets}

    def echoed(self, c: Completion) -> dict[str, Any]:
        """OpenAI's echo: the prompt's text before the completion's, and (with logprobs) the prompt's tokens
        first in the legacy logprobs, the first one's logprob null (it has no context)."""
        prompt = self.tokenizer.decode(c.prompt_token_ids, skip_special_tokens=False)
        out: dict[str, Any] = {"text": prompt + c.text}
        if self.logprobs is not None:
            whole = Completion(c.request_id, c.index, [], [*c.prompt_token_ids, *c.token_ids],
                               logprobs=[*(c.prompt_logprobs or [None] * len(c.prompt_token_ids)), *c.logprobs],
                               top_logprobs=[*[t or {} for t in (c.prompt_top_logprobs
                                                                 or [{}] * len(c.prompt_token_ids))],
                                             *c.top_logprobs])
            lp = self.completion_logprobs(whole)
            if lp is not None and lp["top_logprobs"] is not None:
                lp["top_logprobs"][0] = None
            out["logprobs"] = lp
        return out

    def vllm_prompt_logprobs(self, c: Completion) -> list[dict[str, Any] | None]:
        """vLLM's shape: per prompt token, {token_id: {"logprob", "rank", "decoded_token"}} for the token and
        its top alternatives; None for the first."""
        out: list[dict[str, Any] | None] = []
        tops = c.prompt_top_logprobs or [None] * len(c.prompt_token_ids)
        for i, (t, lp) in enumerate(zip(c.prompt_token_ids, c.prompt_logprobs or [], strict=False)):
            if i == 0 or lp is None:
                out.append(None)
                continue
            alts = dict(sorted((tops[i] or {}).items(), key=lambda kv: -kv[1])[:self.prompt_logprobs or 0])
            entry = {str(t): {"logprob": lp, "rank": None, "decoded_token": self.token_text(t)}}
            for rank, (k, v) in enumerate(alts.items(), 1):
                entry.setdefault(str(k), {"logprob": v, "rank": rank, "decoded_token": self.token_text(k)})
            out.append(entry)
        return out

    def chat_logprobs(self, token_ids: list[int], logprobs: list[float],
                      tops: list[dict[int, float]]) -> dict[str, Any] | None:
        if self.logprobs is None:
            return None
        content = []
        for j, (t, lp) in enumerate(zip(token_ids, logprobs, strict=True)):
            text = self.token_text(t)
            alts = [{"token": (s := self.token_text(k)), "logprob": v, "bytes": list(s.encode())}
                    for k, v in (tops[j].items() if j < len(tops) and self.logprobs else [])]
            content.append({"token": text, "logprob": lp, "bytes": list(text.encode()), "top_logprobs": alts})
        return {"content": content}

    def finish_reason(self, c: Completion, tool_calls: list[Any] | None = None) -> str:
        if tool_calls:
            return "tool_calls"
        return c.finish_reason if c.finish_reason in ("stop", "length") else (c.finish_reason or "stop")

    def body(self) -> dict[str, Any]:
        choices = []
        for i in sorted(self.done):
            c = self.done[i]
            if self.kind == "chat":
                message = self.message(i)
                choice = {"index": i, "message": message,
                          "finish_reason": self.finish_reason(c, message.get("tool_calls")),
                          "logprobs": self.chat_logprobs(c.token_ids, c.logprobs, c.top_logprobs)}
            else:
                choice = {"index": i, "text": c.text, "finish_reason": self.finish_reason(c),
                          "logprobs": self.completion_logprobs(c)}
                if self.echo:
                    choice.update(self.echoed(c))
                if self.prompt_logprobs is not None:
                    choice["prompt_logprobs"] = self.vllm_prompt_logprobs(c)
            choice.update(self.rl_fields(c))
            choices.append(choice)
        return {"id": self.rid, "object": "chat.completion" if self.kind == "chat" else "text_completion",
                "created": self.created, "model": self.model, "choices": choices, "usage": self.usage(),
                "system_fingerprint": f"temper-v{self.version}", "policy_version": self.version}
