"""FairLock: granted in arrival order (a thread that releases and re-takes it at once goes behind a
waiting one), reentrant, and released only by its holder."""

import threading
import time

import pytest

from temper.engine.fair_lock import FairLock


def test_a_waiting_thread_gets_the_lock_before_the_releaser_takes_it_again():
    lock, stop = FairLock(), threading.Event()
    rounds = [0]

    def busy_loop() -> None:  # the engine loop's pattern: hold, work, release, re-take at once
        while not stop.is_set():
            with lock:
                rounds[0] += 1
                time.sleep(0.002)

    looper = threading.Thread(target=busy_loop)
    looper.start()
    try:
        time.sleep(0.05)
        before = rounds[0]
        with lock:
            waited = rounds[0] - before
    finally:
        stop.set()
        looper.join(timeout=5)
    assert waited <= 1


def test_reentrant_for_its_holder_and_refused_to_others():
    lock = FairLock()
    with lock, lock:  # a second acquire by the holder
        errors: list[Exception] = []

        def other() -> None:
            try:
                lock.release()
            except RuntimeError as e:
                errors.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert errors and "does not hold it" in str(errors[0])
    got = threading.Event()
    t = threading.Thread(target=lambda: (lock.acquire(), got.set(), lock.release()))
    t.start()
    t.join(timeout=5)
    assert got.is_set()  # fully released after the two exits


def test_release_without_acquire_is_an_error():
    with pytest.raises(RuntimeError):
        FairLock().release()
