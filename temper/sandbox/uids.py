"""Dedicated host uids, one per live Landlock-mode sandbox, leased through lock files.

A uid of its own lets the supervisor kill everything a command left behind with kill(-1)
and makes RLIMIT_NPROC count per sandbox (RLIMIT_NPROC is per uid and ignored for root).
"""

import fcntl
import os
import random
from pathlib import Path

from temper.sandbox.errors import SandboxError


class UidLease:
    def __init__(self, uid: int, fd: int | None):
        self.uid, self._fd = uid, fd

    @property
    def dedicated(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock
            self._fd = None


def lease(base: int, slots: int, lock_dir: Path) -> UidLease:
    """A free uid in [base, base+slots); without root, our own uid (not dedicated)."""
    if os.geteuid() != 0:
        return UidLease(os.getuid(), None)
    lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    start = random.randrange(slots)
    for i in range(slots):
        uid = base + (start + i) % slots
        fd = os.open(lock_dir / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return UidLease(uid, fd)
        except BlockingIOError:
            os.close(fd)
    raise SandboxError(f"uid_slots: all {slots} sandbox uids from {base} are in use")
