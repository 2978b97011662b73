"""The seccomp filter every sandboxed command runs under, built with libseccomp (pyseccomp).

Denied with EPERM: new user namespaces, ptrace and cross-process memory access, mount and
the new mount API, kernel keyrings, bpf, perf, module and kexec loading, io_uring (whose
requests bypass seccomp), TIOCSTI, and every socket family but AF_UNIX. In Landlock mode,
where the host's filesystem is visible, unix `connect` is denied too, since Landlock cannot
yet scope pathname sockets. clone3 answers ENOSYS so that libc falls back to clone, whose
flags a filter can inspect.
"""

import contextlib
import errno
import tempfile
from functools import lru_cache

DENY = (
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsmount", "fsconfig", "fspick",
    "mount_setattr", "setns", "add_key", "request_key", "keyctl", "bpf", "perf_event_open",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
    "swapon", "swapoff", "acct", "iopl", "ioperm", "quotactl", "lookup_dcookie", "open_by_handle_at",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "syslog",
)
AF_UNIX = 1
CLONE_NEWUSER = 0x10000000
TIOCSTI = 0x5412
SOCK_TYPE_MASK = 0xF
SOCK_DGRAM = 2


# An image sandbox has a network namespace of its own (loopback only): its commands may use IP sockets and
# netlink (ip, ss) there, and nothing else beyond AF_UNIX.
IMAGE_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK


@lru_cache(maxsize=4)
def build_filter(strict_unix: bool, image: bool = False) -> bytes:
    """The filter as raw BPF (cached): the supervisor installs it in each child before exec."""
    import pyseccomp as sc

    f = sc.SyscallFilter(defaction=sc.ALLOW)
    eperm = sc.ERRNO(errno.EPERM)
    for name in DENY:
        with contextlib.suppress(RuntimeError, ValueError, OSError):  # a syscall this arch lacks
            f.add_rule(eperm, name)
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    f.add_rule(eperm, "unshare", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    f.add_rule(eperm, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER))
    f.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, TIOCSTI))
    for call in ("socket", "socketpair"):
        if image:
            top = max(IMAGE_FAMILIES)
            f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.GT, top))
            for family in sorted(set(range(top)) - set(IMAGE_FAMILIES)):
                f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.EQ, family))
        else:
            f.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), call, sc.Arg(0, sc.NE, AF_UNIX))
    if strict_unix:
        f.add_rule(eperm, "connect")
        f.add_rule(eperm, "sendto", sc.Arg(4, sc.NE, 0))
        for call in ("socket", "socketpair"):
            f.add_rule(eperm, call, sc.Arg(1, sc.MASKED_EQ, SOCK_TYPE_MASK, SOCK_DGRAM))
    with tempfile.TemporaryFile() as tmp:
        f.export_bpf(tmp)
        tmp.seek(0)
        return tmp.read()


def available() -> tuple[bool, str]:
    try:
        bpf = build_filter(False)
    except Exception as exc:
        return False, f"libseccomp unavailable: {exc}"
    return True, f"{len(bpf) // 8} BPF instructions (libseccomp via pyseccomp)"
