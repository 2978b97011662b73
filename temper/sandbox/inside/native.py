"""Raw Linux calls through ctypes (x86_64 and aarch64): namespaces, mounts, seccomp, Landlock.

Self-contained so that the host can probe the same calls (`temper sandbox check`).
"""

import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self, openat2: the same numbers on
# x86_64 and aarch64 (and every arch using the generic table).
_NR = (444, 445, 446, 437)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MNT_DETACH = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_BIND, MS_REC = 1, 2, 4, 4096, 16384
MS_PRIVATE, MS_SLAVE, MS_SHARED = 1 << 18, 1 << 19, 1 << 20
PR_CAPBSET_DROP = 24
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(os.uname().machine, 155)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE = 38, 22, 36, 4
SECCOMP_MODE_FILTER = 2


def _fail(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    if _libc.unshare(flags) != 0:
        raise _fail("unshare")


def setns(fd: int, nstype: int) -> None:
    """The calling thread joins the namespace `fd` refers to (e.g. /proc/PID/ns/net, CLONE_NEWNET)."""
    if _libc.setns(fd, nstype) != 0:
        raise _fail("setns")


def mount(src: str, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    r = _libc.mount(src.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                    data.encode() if data else None)
    if r != 0:
        raise _fail(f"mount {fstype or 'bind'} on {target}")


def umount(target: str) -> None:
    if _libc.umount2(target.encode(), MNT_DETACH) != 0:
        raise _fail(f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    if _libc.syscall(_PIVOT_ROOT, new_root.encode(), put_old.encode()) != 0:
        raise _fail(f"pivot_root {new_root}")


def prctl(option: int, arg: int = 0) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        raise _fail(f"prctl {option}")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SeccompProgram:
    """A BPF program prepared in the parent, so that a forked child only makes one prctl call."""

    def __init__(self, bpf: bytes):
        if len(bpf) % 8:
            raise ValueError("seccomp BPF must be a whole number of 8-byte instructions")
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buf, ctypes.c_void_p))

    def install(self) -> None:
        """Needs no_new_privs (or CAP_SYS_ADMIN); applies to this process and everything it starts."""
        r = _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self._prog), 0, 0)
        if r != 0:
            raise _fail("seccomp")


# Landlock (see linux/landlock.h). Rights per ABI version; files accept only file rights.
LL_FS = [0x1FFF, 0x3FFF, 0x7FFF, 0x7FFF, 0xFFFF, 0xFFFF, 0xFFFF]  # ABI 1..7
LL_FILE_RIGHTS = 0x1 | 0x2 | 0x4 | 0x4000 | 0x8000  # execute, write, read, truncate, ioctl_dev
LL_READ = 0x1 | 0x4 | 0x8  # execute, read file, read dir
LL_NET_TCP = 0x3  # bind + connect (ABI >= 4)
LL_SCOPE = 0x3  # abstract unix sockets + signals (ABI >= 6)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version, 0 when unsupported or disabled."""
    v = _libc.syscall(_NR[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(int(v), 0)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_ruleset(read: list[str], write: list[str]) -> int:
    """A ruleset fd: `read` paths readable/executable, `write` paths fully writable; all TCP,
    abstract unix sockets and signals to processes outside the domain denied (when the ABI has them)."""
    abi = landlock_abi()
    if abi < 1:
        raise OSError(95, "Landlock is not available")
    fs = LL_FS[min(abi, len(LL_FS)) - 1]
    attr = _RulesetAttr(fs, LL_NET_TCP if abi >= 4 else 0, LL_SCOPE if abi >= 6 else 0)
    size = 8 if abi < 4 else (16 if abi < 6 else 24)
    fd = _libc.syscall(_NR[0], ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        raise _fail("landlock_create_ruleset")
    for paths, rights in ((read, LL_READ), (write, fs)):
        for path in paths:
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a path the host lacks is simply not granted
            allowed = rights if os.path.isdir(path) else rights & LL_FILE_RIGHTS & fs
            rule = _PathBeneath(allowed, pfd)
            r = _libc.syscall(_NR[1], ctypes.c_int(fd), ctypes.c_int(1), ctypes.byref(rule), ctypes.c_uint32(0))
            os.close(pfd)
            if r != 0:
                raise _fail(f"landlock_add_rule {path}")
    return int(fd)


def landlock_restrict(ruleset_fd: int) -> None:
    if _libc.syscall(_NR[2], ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)) != 0:
        raise _fail("landlock_restrict_self")


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


RESOLVE_NO_MAGICLINKS, RESOLVE_BENEATH = 0x02, 0x08


def open_beneath(dir_fd: int, path: str, flags: int, mode: int = 0o644) -> int:
    """openat2 with RESOLVE_BENEATH: the kernel refuses `..` and symlinks that leave `dir_fd`."""
    how = _OpenHow(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(_NR[3], ctypes.c_int(dir_fd), path.encode(), ctypes.byref(how), ctypes.c_size_t(24))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def limit_capabilities(keep: frozenset[int]) -> None:
    """Every capability but `keep` leaves the bounding set, and none stays inheritable or ambient: a
    program this process starts as root has `keep` alone (this process keeps its own)."""
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            prctl(PR_CAPBSET_DROP, cap)
    _libc.prctl(47, 4, 0, 0, 0)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL (an old kernel has none)
    header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if _libc.capget(ctypes.byref(header), data) != 0:
        raise _fail("capget")
    for d in data:
        d.inheritable = 0
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise _fail("capset")


# The new mount API (same numbers on x86_64 and aarch64): a folder made a read-only mount through file
# descriptors alone, so that nothing swapped for a link meanwhile is followed.
_OPEN_TREE, _MOVE_MOUNT, _MOUNT_SETATTR = 428, 429, 442
_OPEN_TREE_CLONE, _AT_EMPTY_PATH, _MOVE_MOUNT_F_EMPTY_PATH, _MOVE_MOUNT_T_EMPTY_PATH = 1, 0x1000, 0x4, 0x40
MOUNT_ATTR_RDONLY = 0x1
UMOUNT_NOFOLLOW = 0x8


class _MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def bind_read_only(dir_fd: int) -> None:
    """Mount the folder `dir_fd` names on itself, read-only (open_tree, mount_setattr, move_mount)."""
    tree = _libc.syscall(_OPEN_TREE, ctypes.c_int(dir_fd), b"", _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_EMPTY_PATH)
    if tree < 0:
        raise _fail("open_tree")
    try:
        attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
        if _libc.syscall(_MOUNT_SETATTR, ctypes.c_int(tree), b"", _AT_EMPTY_PATH, ctypes.byref(attr),
                         ctypes.c_size_t(ctypes.sizeof(attr))) != 0:
            raise _fail("mount_setattr")
        if _libc.syscall(_MOVE_MOUNT, ctypes.c_int(tree), b"", ctypes.c_int(dir_fd), b"",
                         _MOVE_MOUNT_F_EMPTY_PATH | _MOVE_MOUNT_T_EMPTY_PATH) != 0:
            raise _fail("move_mount")
    finally:
        os.close(tree)


def umount_nofollow(target: str) -> None:
    if _libc.umount2(target.encode(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0:
        raise _fail(f"umount {target}")
