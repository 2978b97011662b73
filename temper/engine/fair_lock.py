"""A reentrant lock granted in arrival order.

The engine's loop thread releases its lock after a step and takes it again at once for the
next one. With `threading.RLock` the releasing thread usually wins that race, so an abort or a
weight update could wait out a whole generation (seen on 2 busy cores: an abort after 3 tokens
landed after all 100). Granting the lock first come, first served puts a waiting caller
between two steps.
"""

import threading
from collections import deque


class FairLock:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._queue: deque[object] = deque()  # one ticket per waiting thread, in arrival order

    def acquire(self) -> bool:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            ticket = object()
            self._queue.append(ticket)
            while self._owner is not None or self._queue[0] is not ticket:
                self._cond.wait()
            self._queue.popleft()
            self._owner, self._depth = me, 1
            return True

    def release(self) -> None:
        with self._cond:
            if self._owner != threading.get_ident():
                raise RuntimeError("FairLock released by a thread that does not hold it")
            self._depth -= 1
            if not self._depth:
                self._owner = None
                self._cond.notify_all()

    def __enter__(self) -> "FairLock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
