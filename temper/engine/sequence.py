"""A sequence: one sample being generated, its tokens, its KV blocks and its progress.

Tokens [0, num_computed) have their keys and values in the cache; the rest are pending.
A decoding sequence has exactly one pending token (the last sampled one); a prefilling or
preempted-and-recomputing one has more. The scheduler treats both the same way.
"""

from enum import Enum, auto
from typing import Any

import torch

from temper.generation.completion import Completion
from temper.generation.sampling_params import SamplingParams


class Status(Enum):
    WAITING = auto()
    RUNNING = auto()
    FINISHED = auto()


class Sequence:
    def __init__(self, seq_id: int, request_id: str, index: int, prompt: list[int], params: SamplingParams,
                 seed: int, arrival: int, speculate: bool = True):
        self.seq_id = seq_id
        self.request_id = request_id
        self.index = index
        self.params = params
        self.token_ids = list(prompt)
        self.num_prompt_tokens = len(prompt)
        self.num_computed = 0
        self.num_cached_prompt_tokens = 0
        self.block_table: list[int] = []
        self.block_hashes: list[int] = []  # chained hashes of the full blocks, in order
        self.status = Status.WAITING
        self.arrival = arrival
        self.kv_epoch = -1  # cache epoch of the KV in `block_table`; stale KV is never shared
        # One generator per sample: reproducible whatever the batch, preemption or timing.
        self.generator = torch.Generator().manual_seed(seed)
        self.logprobs: list[float] = []
        self.top_logprobs: list[dict[int, float]] = []
        self.versions: list[int] = []
        self.prompt_logprobs: list[float | None] = [None]  # the first prompt token has no context
        self.prompt_top_logprobs: list[dict[int, float] | None] = [None]
        self.text = ""
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None
        self.error: str | None = None
        self.matcher: Any = None  # the grammar matcher of a structured request (grammar.py), following the tokens
        self.speculate = speculate  # the request may draft (serve: only its fast variant's requests do)

    def __len__(self) -> int:
        return len(self.token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - self.num_prompt_tokens

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[self.num_prompt_tokens:]

    @property
    def num_pending(self) -> int:
        return len(self.token_ids) - self.num_computed

    @property
    def finished(self) -> bool:
        return self.status is Status.FINISHED

    def append(self, token: int, logprob: float, version: int, top: dict[int, float] | None) -> None:
        self.token_ids.append(token)
        self.logprobs.append(logprob)
        self.versions.append(version)
        if top is not None:
            self.top_logprobs.append(top)

    def to_completion(self) -> Completion:
        return Completion(
            request_id=self.request_id, index=self.index,
            prompt_token_ids=self.token_ids[: self.num_prompt_tokens],
            token_ids=self.output_token_ids, text=self.text, logprobs=list(self.logprobs),
            top_logprobs=list(self.top_logprobs), versions=list(self.versions),
            finish_reason=self.finish_reason, stop_reason=self.stop_reason, error=self.error,
            num_cached_prompt_tokens=self.num_cached_prompt_tokens,
            prompt_logprobs=self.prompt_logprobs if self.params.prompt_logprobs else None,
            prompt_top_logprobs=self.prompt_top_logprobs if self.params.prompt_logprobs and self.params.logprobs
            else None,
        )
