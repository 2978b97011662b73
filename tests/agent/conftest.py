"""A scripted GenerationClient: a legitimate double of the engine's protocol for deterministic
loop tests. It returns fixed texts as token ids (each ending with <|im_end|>), with made-up
logprobs and a policy version per call, and records every request it got."""

import pytest

from temper.generation.completion import Completion
from temper.generation.sampling_params import SamplingParams


class ScriptedClient:
    def __init__(self, tokenizer, turns: list[str], version: int = 3, eos: bool = True) -> None:
        self.tok, self.turns, self.version, self.eos = tokenizer, list(turns), version, eos
        self.requests: list[tuple[list[int], SamplingParams]] = []

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        self.requests.append((list(token_ids), params))
        text = self.turns.pop(0) if self.turns else "I am done."
        ids = self.tok.encode(text)
        end = [self.tok.token_to_id("<|im_end|>")] if self.eos else []
        finish = "stop"
        if len(ids) + len(end) > params.max_tokens:
            ids, end, finish = ids[: params.max_tokens], [], "length"
        ids = ids + end
        n = len(self.requests)
        return Completion(f"r{n}", 0, list(token_ids), ids, text, [-0.5] * len(ids), [], [self.version + n] * len(ids),
                          finish)


@pytest.fixture
def scripted(smollm2_tokenizer):
    return lambda turns, **kw: ScriptedClient(smollm2_tokenizer, turns, **kw)
