"""A summary of older turns written by the policy itself (`agent.context.summarizer: model`).

As OpenHands' LLM condenser and Claude Code's compaction do: the model reads its older turns and writes
down what the rest of the episode needs. One greedy call on the episode's own generation client (so its
tokens are metered with the episode's), outside every trajectory: a summary is never trained on. The
turns it reads are trimmed to fit the context budget; an empty summary falls back to the extractive one.
"""

from typing import Any

from temper.agent.chat_format import ChatFormat
from temper.agent.context import TurnNote, extractive_summary, trim
from temper.agent.episode import InfraFailure
from temper.generation.protocol import GenerationClient, SamplingParams
from temper.trajectory import FailureKind

INSTRUCTION = ("Below are your earlier turns in this task. Write a short summary of them for yourself: every fact, "
               "number, name and result you will still need, and what you have already tried. Only the summary.")


class ModelSummarizer:
    """`await ModelSummarizer(client, fmt, budget, max_tokens)(turns)` -> the model's summary of `turns`."""

    generates = True  # a generation: ContextManager.compact calls it once per compaction, with room kept for it

    def __init__(self, client: GenerationClient, fmt: ChatFormat, budget: int, max_tokens: int) -> None:
        self.client, self.fmt, self.budget, self.max_tokens = client, fmt, budget, max_tokens

    async def __call__(self, turns: list[TurnNote]) -> str:
        history = "\n\n".join(_turn(i, t) for i, t in enumerate(turns, 1))
        room = self.budget - self.max_tokens - len(self.fmt.prompt_ids(self._messages(""))) - 8
        ids = self.fmt.prompt_ids(self._messages(trim(self.fmt.tok, history, max(room, 32))))
        params = SamplingParams(temperature=0.0, max_tokens=max(1, min(self.max_tokens, self.budget - len(ids))))
        try:
            c = await self.client.generate(ids, params)
        except Exception as exc:
            raise InfraFailure(FailureKind.ENGINE_ERROR, f"summary generation failed: {type(exc).__name__}: "
                               f"{exc}") from exc
        if c.finish_reason == "error":
            raise InfraFailure(FailureKind.ENGINE_ERROR, f"summary generation failed: {c.error}")
        text = self.fmt.tok.decode(c.token_ids, skip_special_tokens=True).strip()
        return text or await extractive_summary(turns)

    def _messages(self, history: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": f"{INSTRUCTION}\n\n{history}"}]


def _turn(i: int, t: TurnNote) -> str:
    said = t.text.strip() or "(no text)"
    return f"Turn {i}. You wrote: {said}" + (f"\nResult: {t.observation.strip()}" if t.observation.strip() else "")
