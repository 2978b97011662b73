"""temper/cores.py on real threads and torch's real thread pools: a thread's torch.set_num_threads leaves the
others' alone (what the share relies on), the engine's step takes every core while the trainer waits and its
share while it works, and the trainer takes every core only when told no rollout can start."""

import threading
from collections.abc import Iterator

import pytest
import torch

from temper.cores import CoreShare


@pytest.fixture(autouse=True)
def _restore_threads() -> Iterator[None]:
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def in_thread(fn):
    """fn() on a new thread; its result."""
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(timeout=30)
    return out[0]


def test_a_threads_set_num_threads_leaves_other_threads_alone():
    torch.set_num_threads(1)
    ready, changed, seen = threading.Event(), threading.Event(), {}

    def other() -> None:
        torch.ones(4096).sum()  # its first parallel region: it takes the process's value, 1
        seen["before"] = torch.get_num_threads()
        ready.set()
        changed.wait(10)
        seen["after"] = torch.get_num_threads()

    t = threading.Thread(target=other)
    t.start()
    ready.wait(10)
    torch.set_num_threads(2)  # this thread's team only
    changed.set()
    t.join(10)
    assert seen == {"before": 1, "after": 1} and torch.get_num_threads() == 2


def test_the_engine_takes_every_core_while_the_trainer_waits_and_its_share_while_it_works():
    share = CoreShare(each=1, total=2)

    def engine_step() -> tuple[int, int]:
        n = share.engine_threads()
        return n, torch.get_num_threads()

    assert in_thread(engine_step) == (2, 2)  # the trainer is idle

    def trainer_step() -> tuple[int, tuple[int, int]]:
        return torch.get_num_threads(), in_thread(engine_step)  # the engine steps while the trainer works

    mine, engine = share.run_trainer(False, trainer_step)
    assert mine == 1 and engine == (1, 1)
    assert share.run_trainer(True, torch.get_num_threads) == 2  # no rollout can start: every core
    share.engine_idle()
    assert share.alone == {"engine": 1, "trainer": 1}


def test_a_failing_step_still_gives_the_cores_back():
    share = CoreShare(each=1, total=2)
    with pytest.raises(RuntimeError, match="bad batch"):
        share.run_trainer(False, lambda: (_ for _ in ()).throw(RuntimeError("bad batch")))
    assert in_thread(share.engine_threads) == 2  # the trainer is no longer marked busy
