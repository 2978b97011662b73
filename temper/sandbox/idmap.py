"""The staged templates as a bwrap sandbox with a leased uid must see them: owned by that uid.

Staged templates are owned by `SandboxConfig.uid` (see stage.py). A bwrap sandbox running as
host uid X sees only X mapped in its user namespace: files of another owner show as `nobody`,
are read-only to its commands, and its overlay cannot copy them up. So instead of a chown per
uid, each sandbox binds an idmapped view of the templates folder (mount_setattr
MOUNT_ATTR_IDMAP, Linux 5.12+) in which the staging uid reads as X: three syscalls at a cold
start, an unmount at close. The user namespace holding the mapping is made once per uid per
process (a short-lived `unshare` child) and kept as an fd.
"""

import contextlib
import ctypes
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from temper import firsttime

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
# open_tree, move_mount, mount_setattr: the same numbers on x86_64, aarch64 (the generic table).
_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442
OPEN_TREE_CLONE, AT_EMPTY_PATH, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x1000, 0x4
MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV, MOUNT_ATTR_IDMAP = 0x1, 0x2, 0x4, 0x100000
AT_FDCWD, MNT_DETACH = -100, 2


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


_userns: dict[tuple[int, int], int] = {}
_lock = threading.Lock()


def _check(r: int, what: str) -> int:
    if r < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return r


def _userns_fd(owner: int, uid: int) -> int:
    """A user namespace mapping uid and gid `owner` to `uid` (cached: one per uid per process)."""
    with _lock:
        if (owner, uid) in _userns:
            return _userns[(owner, uid)]
        exe = shutil.which("unshare")
        if exe is None:
            raise OSError("unshare (util-linux) not found")
        mine = os.stat("/proc/self/ns/user").st_ino
        child = subprocess.Popen([exe, "--user", "--", "cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 5
            while os.stat(f"/proc/{child.pid}/ns/user").st_ino == mine:  # until it has unshared
                if child.poll() is not None or time.monotonic() > deadline:
                    raise OSError(f"unshare --user did not start (exit {child.poll()})")
                time.sleep(0.0005)
            for name in ("uid_map", "gid_map"):  # as root in the parent namespace: no setgroups needed
                with open(f"/proc/{child.pid}/{name}", "w") as f:
                    f.write(f"{owner} {uid} 1\n")
            fd = os.open(f"/proc/{child.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            child.kill()
            child.wait()
        _userns[(owner, uid)] = fd
        return fd


def mount_view(src: Path, target: Path, owner: int, uid: int) -> None:
    """Bind `src` read-only at `target` (created), with files of `owner` showing as `uid`."""
    ns = _userns_fd(owner, uid)
    firsttime.write_owner(target)  # first: a view whose owner is gone is a crashed run's (leftovers.py)
    target.mkdir(parents=True, exist_ok=True)
    fd = _check(_libc.syscall(_OPEN_TREE, AT_FDCWD, str(src).encode(), OPEN_TREE_CLONE | os.O_CLOEXEC),
                f"open_tree {src}")
    try:
        attr = _MountAttr(MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, 0, 0, ns)
        _check(_libc.syscall(_MOUNT_SETATTR, fd, b"", AT_EMPTY_PATH, ctypes.byref(attr), ctypes.sizeof(attr)),
               f"mount_setattr idmap {src}")
        _check(_libc.syscall(_MOVE_MOUNT, fd, b"", AT_FDCWD, str(target).encode(), MOVE_MOUNT_F_EMPTY_PATH),
               f"move_mount {target}")
    finally:
        os.close(fd)


def unmount_view(target: Path) -> None:
    _libc.umount2(str(target).encode(), MNT_DETACH)
    with contextlib.suppress(OSError):
        target.rmdir()
    firsttime.drop_owner(target)


_works: dict[Path, bool] = {}


def available(templates: Path, owner: int) -> bool:
    """Can this host make idmapped views of `templates` (root, kernel, filesystem)? Tried once."""
    if os.geteuid() != 0:
        return False
    if templates not in _works:
        probe = templates.parent / "views" / f".probe-{os.getpid()}"
        try:
            mount_view(templates, probe, owner, owner + 1)
            unmount_view(probe)
            _works[templates] = True
        except OSError:
            with contextlib.suppress(OSError):
                probe.rmdir()
            firsttime.drop_owner(probe)
            _works[templates] = False
    return _works[templates]
