"""Every live sandbox has a host uid of its own, so no per-uid kernel limit couples two of them
(RLIMIT_NPROC counts per uid); and commands start with no fds but the ones they open themselves."""

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import MODES, make_config, tight_limits

from temper.sandbox import Sandbox, SandboxConfig, SandboxError, SandboxPool

# Opens inotify instances until the kernel refuses, prints how many, holds them HOLD seconds.
FILL_INOTIFY = """
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 4096:
    if libc.inotify_init() < 0:
        break
    n += 1
print(n, os.strerror(ctypes.get_errno()), flush=True)
time.sleep(float(sys.argv[1]))
"""

# Creates POSIX message queues until RLIMIT_MSGQUEUE refuses one, holds them, then unlinks them.
FILL_MQUEUE = """
import ctypes, os, sys, time
rt = ctypes.CDLL("librt.so.1", use_errno=True)
class Attr(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_long), ("maxmsg", ctypes.c_long), ("msgsize", ctypes.c_long),
                ("cur", ctypes.c_long), ("pad", ctypes.c_long * 4)]
rt.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.POINTER(Attr)]
names, err = [], 0
for i in range(64):
    name = f"/{sys.argv[2]}{i}".encode()
    if rt.mq_open(name, os.O_CREAT | os.O_RDWR, 0o600, ctypes.byref(Attr(0, 10, 8192, 0))) < 0:
        err = ctypes.get_errno()
        break
    names.append(name)
print(len(names), os.strerror(err), flush=True)
time.sleep(float(sys.argv[1]))
for name in names:
    rt.mq_unlink(name)
"""


def _script(sb: Sandbox, name: str, text: str) -> str:
    sb.write_file(name, text)
    return sb.path(name)


def inotify_count(sb: Sandbox, hold: float = 0.0) -> int:
    r = sb.exec(["python3", _script(sb, "fill_inotify.py", FILL_INOTIFY), str(hold)], timeout=hold + 20)
    assert r.exit_code == 0, r
    return int(r.stdout.split()[0])


def mqueue_count(sb: Sandbox, hold: float = 0.0) -> int:
    r = sb.exec(["python3", _script(sb, "fill_mq.py", FILL_MQUEUE), str(hold), f"t{sb.id}q"], timeout=hold + 20)
    assert r.exit_code == 0, r
    return int(r.stdout.split()[0])


@contextmanager
def holding(count: Callable[[Sandbox, float], int], sb: Sandbox, hold: float) -> Iterator[dict]:
    """Run `count(sb, hold)` in a thread: sandbox `sb` holds its limit's worth for `hold` s."""
    got: dict = {}
    t = threading.Thread(target=lambda: got.setdefault("n", count(sb, hold)))
    t.start()
    time.sleep(min(hold / 2, 4.0))  # it fills in well under a second; then holds
    try:
        yield got
    finally:
        t.join()


def host_uid(sb: Sandbox) -> int:
    """The host uid the sandbox's processes run as (its supervisor, or bwrap around it)."""
    assert sb._sup is not None and sb._sup._proc is not None
    return os.stat(f"/proc/{sb._sup._proc.pid}").st_uid


def config(mode: str, state_dir: Path, template: Path, tmp_path: Path, **kw: object) -> SandboxConfig:
    """Room for more open files than the per-uid inotify limit: EMFILE must come from the uid."""
    limits = tight_limits().model_copy(update={"open_files": 1024})
    return make_config(mode, state_dir, template, tmp_path, limits=limits, **kw)


def two(mode: str, state_dir: Path, template: Path, tmp_path: Path, **kw: object) -> tuple[Sandbox, Sandbox]:
    cfg = config(mode, state_dir, template, tmp_path, **kw)
    a = Sandbox(cfg)
    try:
        return a, Sandbox(cfg)
    except BaseException:
        a.close()
        raise


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_concurrent_sandboxes_have_distinct_host_uids(mode: str, state_dir: Path, template: Path,
                                                      tmp_path: Path) -> None:
    a, b = two(mode, state_dir, template, tmp_path)
    try:
        ua, ub = host_uid(a), host_uid(b)
        assert ua != ub and ua != 0 and ub != 0
        rng = range(a.config.uid + 1, a.config.uid + 1 + a.config.uid_slots)
        assert ua in rng and ub in rng
        # the workspace (staged once, owned by `uid`) is still the sandbox's own in each of them
        for sb in (a, b):
            r = sb.exec("echo more >> hello.txt && cat hello.txt && stat -c %u hello.txt")
            assert r.exit_code == 0 and r.text.startswith("hello from the template\nmore\n"), r
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("mode", MODES)
def test_inotify_instances_of_one_sandbox_do_not_starve_another(mode: str, state_dir: Path, template: Path,
                                                                tmp_path: Path) -> None:
    a, b = two(mode, state_dir, template, tmp_path)
    try:
        alone = inotify_count(b)
        assert alone >= 64  # max_user_instances (128 by default), less nothing: the uid is B's alone
        with holding(inotify_count, a, 6.0) as got:
            assert inotify_count(b) == alone  # A holds all of its own uid's instances right now
        assert got["n"] >= 64
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(90)
def test_message_queues_of_one_sandbox_do_not_starve_another(state_dir: Path, template: Path,
                                                             tmp_path: Path) -> None:
    """bwrap only: Landlock-mode commands get no POSIX queues at all (RLIMIT_MSGQUEUE 0: they
    would live in the host's IPC namespace, where a reset cannot find them)."""
    a, b = two("bwrap", state_dir, template, tmp_path)
    try:
        alone = mqueue_count(b)
        assert alone >= 2  # RLIMIT_MSGQUEUE (800 KiB by default) over ~80 KiB queues
        with holding(mqueue_count, a, 6.0) as got:
            assert mqueue_count(b) == alone
        assert got["n"] == alone
    finally:
        a.close()
        b.close()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", MODES)
def test_pooled_sandbox_keeps_its_uid_and_its_limit_is_free_after_reset(mode: str, state_dir: Path,
                                                                        template: Path, tmp_path: Path) -> None:
    cfg = config(mode, state_dir, template, tmp_path, pool_size=2, pool_max=2)
    with SandboxPool(cfg) as pool:
        assert pool.wait_ready(30)
        a = pool.acquire()
        uid, first = host_uid(a), a.id
        a.exec(["bash", "-c", f"setsid python3 {_script(a, 'f.py', FILL_INOTIFY)} 100 >/dev/null &"])
        pool.release(a)
        b = pool.acquire()
        other = pool.acquire()  # A again (reset), or B: take both, find A
        a = b if b.id == first else other
        b = other if a is b else b
        assert a.id == first and host_uid(a) == uid and host_uid(b) != uid  # kept its uid across the reset
        with holding(inotify_count, b, 6.0):  # the other pooled sandbox holds all of its uid's instances
            assert inotify_count(a) >= 64  # what A's last episode left was killed: its uid's count is back to 0
        pool.release(a)
        pool.release(b)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_exhausted_uid_range_fails_with_one_clear_line(mode: str, state_dir: Path, template: Path,
                                                       tmp_path: Path) -> None:
    a, b = two(mode, state_dir, template, tmp_path, uid=62000, uid_slots=2)  # a range no other test uses
    try:
        assert {host_uid(a), host_uid(b)} == {62001, 62002}
        cfg: SandboxConfig = a.config
        with pytest.raises(SandboxError) as err:
            Sandbox(cfg)
        msg = str(err.value)
        assert "\n" not in msg and "62001-62002" in msg and "uid_slots" in msg, msg
        freed = host_uid(b)
        b.close()
        with Sandbox(cfg) as c:  # a closed sandbox's uid is free again at once
            assert host_uid(c) == freed and c.exec("true").exit_code == 0
    finally:
        a.close()
        b.close()


FD_PROBE = """
import os
def is_open(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
print(" ".join(str(fd) for fd in range(3, 1024) if is_open(fd)))
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_commands_inherit_no_stray_fds(mode: str, state_dir: Path, template: Path, tmp_path: Path) -> None:
    with Sandbox(make_config(mode, state_dir, template, tmp_path)) as sb:
        for cmd in (["python3", "-c", FD_PROBE], f"python3 -c '{FD_PROBE}'"):
            r = sb.exec(cmd, stdin=b"x" if isinstance(cmd, str) else None)
            assert r.exit_code == 0 and r.text.strip() == "", r  # only 0, 1 and 2
        if mode == "bwrap":  # (Landlock does not let commands list /proc/self/fd)
            r = sb.exec("ls /proc/self/fd")
            assert r.text.split() == ["0", "1", "2", "3"], r  # 3: ls's own handle on the folder
