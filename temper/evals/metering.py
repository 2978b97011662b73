"""Per-item measurements: a generation client wrapper that counts tokens and times the first
token, and a sampler of the process's peak resident memory."""

import os
import threading
import time
from collections.abc import Sequence
from typing import Any

from temper.generation.completion import Completion, TokenEvent
from temper.generation.sampling_params import SamplingParams

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class MeteredClient:
    """A GenerationClient around another, for one episode: tokens in/out over all its calls, the
    time to the first token of the first call, and the mean time per later output token. It
    streams when the inner client can (the in-process engine), so TTFT is measured, not guessed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = self.tokens_in = self.tokens_out = 0
        self.max_context = 0  # the longest sequence (prompt + output) of one call: what the KV cache held
        self.ttft_s: float | None = None
        self._decode_s = 0.0
        self._decode_tokens = 0

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        start = time.perf_counter()
        first: float | None = None
        completion: Completion | None = None
        if hasattr(self.inner, "stream"):
            async for item in self.inner.stream(list(token_ids), params):
                if isinstance(item, TokenEvent) and first is None:
                    first = time.perf_counter()
                elif isinstance(item, Completion):
                    completion = item
        else:
            completion = await self.inner.generate(token_ids, params)
        end = time.perf_counter()
        assert completion is not None
        n = len(completion.token_ids)
        if first is None and n:  # a non-streaming client: the whole call is the first token's wait
            first = end
        if self.calls == 0 and first is not None:
            self.ttft_s = first - start
        if first is not None and n > 1:
            self._decode_s += end - first
            self._decode_tokens += n - 1
        self.calls += 1
        self.tokens_in += len(token_ids)
        self.tokens_out += n
        self.max_context = max(self.max_context, len(token_ids) + n)
        return completion

    @property
    def tpot_s(self) -> float | None:
        return self._decode_s / self._decode_tokens if self._decode_tokens else None


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE / 2**20
    except OSError:  # not Linux: the peak so far is the best we have
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakMemory:
    """Peak resident memory of this process (MiB) while the block runs, sampled every `interval_s`.
    With several items in flight it is the process's peak over the item, not the item's own share."""

    def __init__(self, interval_s: float = 0.02) -> None:
        self.interval_s, self.peak_mb = interval_s, 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, rss_mb())
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "PeakMemory":
        self.peak_mb = rss_mb()
        self._thread = threading.Thread(target=self._run, daemon=True, name="temper-peak-mem")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak_mb = max(self.peak_mb, rss_mb())


def mean(values: Sequence[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None
