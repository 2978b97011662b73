"""Host uids, one per live sandbox (both isolation modes), leased through lock files.

A uid of its own keeps every per-uid kernel count apart between sandboxes: inotify instances
and watches, RLIMIT_MSGQUEUE bytes, RLIMIT_NPROC (per uid, ignored for root), and lets the
Landlock-mode supervisor kill everything a command left behind with kill(-1). A sandbox keeps
its uid for its whole life: a reset kills all its processes, so its counts drop back to zero
without a new uid. The range is `uid + 1 .. uid + uid_slots` (`uid` itself owns the staged
templates); the locks are host-wide, so sandboxes of every process (whatever their state_dir)
get distinct uids. When every uid is leased a new sandbox fails at once (`UidsExhausted`,
one line naming the range and `uid_slots`); a pool's acquire passes it on.

Only root can run sandboxes as other uids; otherwise every sandbox runs as our own uid.
"""

import contextlib
import fcntl
import os
import threading
from pathlib import Path

from temper import firsttime
from temper.sandbox import idmap, layout
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import SandboxError

HOST_LOCK_DIR = Path("/run/temper-sandbox/uids")  # one lock per uid for the whole host


class UidsExhausted(SandboxError):
    pass


class UidLease:
    def __init__(self, uid: int, fd: int | None, view: Path | None = None):
        self.uid, self._fd, self.view = uid, fd, view
        self._lock = threading.Lock()

    @property
    def dedicated(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        # Once, even when two threads close one sandbox (a pool's background reset and its close):
        # a second os.close of the number would close whatever file got it next (an audit log's).
        with self._lock:
            view, fd, self.view, self._fd = self.view, self._fd, None, None
        if view is not None:
            idmap.unmount_view(view)
        if fd is not None:
            os.close(fd)  # closing drops the flock


def uid_range(cfg: SandboxConfig) -> range:
    return range(cfg.uid + 1, cfg.uid + 1 + cfg.uid_slots)


def lock_dir(cfg: SandboxConfig) -> Path:
    return HOST_LOCK_DIR if Path("/run").is_dir() and os.access("/run", os.W_OK) else cfg.state_dir / "uids"


def lease(uids: range, locks: Path) -> UidLease:
    """The lowest free uid of `uids` (so few uids, and their cached mappings, get reused);
    without root, our own uid (not dedicated)."""
    if os.geteuid() != 0:
        return UidLease(os.getuid(), None)
    locks.mkdir(parents=True, exist_ok=True, mode=0o700)
    for uid in uids:
        fd = os.open(locks / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            firsttime.record_owner(fd)  # the kernel drops the lock when we die; this says who held it
            return UidLease(uid, fd)
        except BlockingIOError:
            os.close(fd)
    raise UidsExhausted(f"all {len(uids)} sandbox uids ({uids.start}-{uids.stop - 1}) are leased by live "
                        f"sandboxes; close some, or raise SandboxConfig.uid_slots")


def lease_for(cfg: SandboxConfig, mode: str, sandbox_id: str, templates: Path) -> UidLease:
    """The uid a new sandbox runs as. bwrap also gets `view`: the staged templates as its uid
    sees them (see idmap.py); where idmapped mounts are refused, bwrap sandboxes share `uid`
    as before (`temper sandbox check` says so)."""
    if mode == "none" or os.geteuid() != 0:
        return UidLease(os.getuid(), None)
    if mode == "bwrap" and not idmap.available(templates, cfg.uid):
        return UidLease(cfg.uid, None)
    got = lease(uid_range(cfg), lock_dir(cfg))
    if mode == "bwrap":
        try:
            view = templates.parent / "views" / sandbox_id
            idmap.mount_view(templates, view, cfg.uid, got.uid)
            got.view = view
        except BaseException:
            got.release()
            raise
    return got


def free(cfg: SandboxConfig) -> int:
    """How many uids of the range no live sandbox holds (for `temper sandbox check`)."""
    locks, n = lock_dir(cfg), 0
    for uid in uid_range(cfg):
        path = locks / f"{uid}.lock"
        if not path.exists():
            n += len(uid_range(cfg)) - (uid - cfg.uid - 1)  # leased lowest first: none above is locked
            break
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            n += 1
        except BlockingIOError:
            pass
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)
    return n


def describe(cfg: SandboxConfig) -> tuple[bool, str]:
    """`temper sandbox check`'s line: is each sandbox's uid its own, from which range, how many free."""
    if os.geteuid() != 0:
        return False, f"not root: every sandbox runs as this uid ({os.getuid()}), sharing its per-uid limits"
    r = uid_range(cfg)
    line = f"one uid per live sandbox from {r.start}-{r.stop - 1} (uid_slots {len(r)}, {free(cfg)} free)"
    if not idmap.available(layout.state_dir(cfg) / "templates", cfg.uid):
        return False, f"{line} in Landlock mode; bwrap sandboxes share uid {cfg.uid} (no idmapped mounts here)"
    return True, line
