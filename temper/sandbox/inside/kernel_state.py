"""Kernel state outside the writable folders that one episode could leave to the next.

SysV shared memory, message queues and semaphores, and POSIX message queues outlive the
processes that made them (and shared memory stays charged to the sandbox's memory limit).
bwrap mode: the supervisor owns an IPC namespace of its own (so it may remove anything in it
and mount its mqueue filesystem at /dev/mqueue, where queues can be listed), and makes
/proc/sys read-only once at start, so that no namespace sysctl (IPC limits, the pid
namespace's pid_max) can be changed at all. Every reset then removes every IPC object: a few
reads of /proc/sysvipc and one listdir. Landlock mode (the host's IPC namespace): a reset
removes the SysV objects of the sandbox's own uid; POSIX queues are refused by
RLIMIT_MSGQUEUE 0 (see direct.py), since the host's queues cannot be listed.
"""

import ctypes
import os

import native

CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 2, 4, 8, 32
IPC_RMID = 0
MQUEUE = "/dev/mqueue"
# /proc/sysvipc/<kind>: (column of the id, column of the owner's uid, column of the creator's uid)
SYSV = {"shm": (1, 7, 9), "msg": (1, 7, 9), "sem": (1, 4, 6)}

_libc = ctypes.CDLL(None, use_errno=True)


def seal_namespace() -> bool:
    """bwrap mode, once at start (we hold every capability of our own user namespace, and our
    IPC namespace is already our own): queues become listable, sysctls unchangeable. True
    when /dev/mqueue is mounted."""
    mqueue = os.path.isdir(MQUEUE)
    if mqueue:
        native.mount("mqueue", MQUEUE, "mqueue", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    native.mount("/proc/sys", "/proc/sys", None, native.MS_BIND)
    native.mount("none", "/proc/sys", None,
                 MS_REMOUNT | native.MS_BIND | native.MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return mqueue


def clear(owner_uid: int | None, mqueue: bool) -> None:
    """Remove every SysV IPC object (only those of `owner_uid` when given: a shared namespace)
    and, with `mqueue`, every POSIX message queue in /dev/mqueue (mounted by `seal_namespace`)."""
    for kind, (id_col, uid_col, cuid_col) in SYSV.items():
        lines = _read(f"/proc/sysvipc/{kind}").splitlines()[1:]
        for line in lines:
            f = line.split()
            if owner_uid is not None and str(owner_uid) not in (f[uid_col], f[cuid_col]):
                continue
            ident = int(f[id_col])
            if kind == "shm":
                _libc.shmctl(ident, IPC_RMID, None)
            elif kind == "msg":
                _libc.msgctl(ident, IPC_RMID, None)
            else:
                _libc.semctl(ident, 0, IPC_RMID)
    if mqueue:
        for name in os.listdir(MQUEUE):
            try:  # noqa: SIM105 - contextlib would cost start-up time here
                os.unlink(f"{MQUEUE}/{name}")
            except OSError:
                pass


def _read(path: str) -> str:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode()
    finally:
        os.close(fd)
