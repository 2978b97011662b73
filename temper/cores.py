"""The machine's cores shared by the two busy threads of `temper train`: the engine's (rollouts) and the trainer's.

Each works with `runtime.threads` intra-op threads (one on the 2-core machine), and each often waits for the
other: the trainer for a batch, the engine for the staleness budget (at max_staleness 0 they take turns), so
half the machine idled. With a share installed (`runtime.share_cores`, in `temper train` with the local
backend), each asks before a piece of work how many threads it may use: all of them while the other has
nothing to do, its own `runtime.threads` while both work. The engine asks before every step (tens of ms), so
it gives the cores back at once when the trainer starts; the trainer asks before its step and takes them all
only when no rollout can start until that step ends (the orchestrator knows: `Pipeline.rollouts_idle`).

torch.set_num_threads sets the calling thread's OpenMP team (torch hands the process-wide value only to a
thread that has not run a parallel region yet), so each thread sets its own. Imports torch only when used.
"""

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class CoreShare:
    def __init__(self, each: int, total: int):
        """`each`: a party's threads while both work; `total`: while it works alone."""
        self.each, self.total = each, max(each, total)
        self._busy = {"engine": False, "trainer": False}
        self._lock = threading.Lock()
        # pieces of work run with all cores (engine steps, trainer steps): the profile, and the tests' proof
        self.alone = {"engine": 0, "trainer": 0}

    def engine_threads(self) -> int:
        """The engine's threads for its next step (it is busy from now until `engine_idle`)."""
        with self._lock:
            self._busy["engine"] = True
            n = self.each if self._busy["trainer"] else self.total
            self.alone["engine"] += n > self.each
        _set_threads(n)
        return n

    def engine_idle(self) -> None:
        with self._lock:
            self._busy["engine"] = False

    def run_trainer(self, alone: bool, fn: Callable[..., T], *args: object) -> T:
        """fn(*args) on the calling (trainer) thread, with all cores if `alone` (no rollout can start before
        it returns), else its own share; marked busy meanwhile, so the engine's next step takes its share."""
        with self._lock:
            self._busy["trainer"] = True
            self.alone["trainer"] += alone and self.total > self.each
        _set_threads(self.total if alone else self.each)
        try:
            return fn(*args)
        finally:
            with self._lock:
                self._busy["trainer"] = False


def _set_threads(n: int) -> None:
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)


_share: CoreShare | None = None


def install(share: CoreShare | None) -> None:
    """The process's share (None: none; each thread keeps the threads it has)."""
    global _share
    _share = share


def current() -> CoreShare | None:
    return _share
