"""Episodes of a warm sandbox cannot see or poison each other.

After a reset (and so a pooled sandbox served again) nothing of the last episode survives: no
file anywhere writable (/dev included: it is read-only), no replaced /dev/fd or /dev/stdin, no
SysV or POSIX IPC object, no changed namespace sysctl, no memory still charged. And disk_mb
bounds every writable filesystem, with `temper sandbox check` saying so truthfully.
"""

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MODES, make_config, tight_limits

from temper.sandbox import Limits, Sandbox, SandboxConfig, SandboxPool
from temper.sandbox.check import check

ALL = [*MODES, "image"]  # image sandboxes: root in a user namespace of its own, on the tests' small image

KEY = random.randrange(1 << 20, 1 << 30)  # SysV keys: Landlock mode shares the host's IPC namespace

# Everything an episode could leave behind, as a command sees it (compared fresh vs reused).
SNAPSHOT = r"""
import os
def entries(d):
    try:
        names = sorted(os.listdir(d))
    except OSError as exc:
        return [f"{d}: {exc.strerror}"]
    out = []
    for n in names:
        p = os.path.join(d, n)
        out.append(f"{p} -> {os.readlink(p)}" if os.path.islink(p) else f"{p} {'dir' if os.path.isdir(p) else 'file'}")
    return out
def read(path):
    try:
        return open(path).read()
    except OSError as exc:  # Landlock mode: /proc/sys is not granted
        return f"{path}: {exc.strerror}"
def sysv():
    out = []
    for kind in ("shm", "msg", "sem"):
        for line in read(f"/proc/sysvipc/{kind}").splitlines()[1:]:
            if str(os.getuid()) in line.split():
                out.append(f"{kind} {line.split()[0]}")
    return out
SYSCTLS = ["kernel/shmmax", "kernel/shmall", "kernel/shmmni", "kernel/msgmax", "kernel/msgmnb", "kernel/msgmni",
           "kernel/sem", "kernel/shm_rmid_forced", "kernel/pid_max", "fs/mqueue/msg_max", "fs/mqueue/msgsize_max",
           "fs/mqueue/queues_max", "fs/mqueue/msg_default", "fs/mqueue/msgsize_default"]
state = entries("/dev") + entries("/dev/shm") + entries("/dev/mqueue") + entries(os.environ["TMPDIR"])
state += entries(".") + sysv() + [f"{s}={read('/proc/sys/' + s).split()}" for s in SYSCTLS]
print("\n".join(state))
"""

# An attacker's episode: leave something everywhere it can (each step may be refused).
POISON = rf"""
echo leaked > /dev/leak; echo leaked > /dev/shm/leak; echo leaked > $TMPDIR/leak; echo leaked > leak
rm -rf /dev/fd /dev/stdin; mkdir /dev/fd; echo same > /dev/fd/63; echo same > /dev/fd/62
echo attacker > /dev/evil; ln -s /dev/evil /dev/stdin
ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; ipcmk -S 3 >/dev/null
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
shm = libc.shmget({KEY}, 1 << 16, 0o1666)
libc.shmat.restype = ctypes.c_void_p
if shm >= 0:
    addr = libc.shmat(shm, None, 0)
    ctypes.memmove(addr, b"episode-1-secret", 16)
msg = libc.msgget({KEY}, 0o1666)
if msg >= 0:
    libc.msgsnd(msg, ctypes.create_string_buffer(b"\1\0\0\0\0\0\0\0secret"), 6, 0)
libc.semget({KEY}, 1, 0o1666)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
q = rt.mq_open(b"/leak", os.O_CREAT | os.O_RDWR, 0o666, None)
if q >= 0:
    rt.mq_send(q, b"secret", 6, 0)
EOF
for s in kernel/shmmax kernel/msgmax kernel/msgmnb kernel/shm_rmid_forced fs/mqueue/msg_max fs/mqueue/queues_max; do
    echo 1 > /proc/sys/$s
done
echo 400 > /proc/sys/kernel/pid_max; echo '1 1 1 1' > /proc/sys/kernel/sem
true
"""

# What a later episode must find: nothing of the above.
LOOK = rf"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
rt = ctypes.CDLL("librt.so.1", use_errno=True)
found = [name for name, r in (("shm", libc.shmget({KEY}, 0, 0)), ("msg", libc.msgget({KEY}, 0)),
                              ("sem", libc.semget({KEY}, 0, 0)), ("mqueue", rt.mq_open(b"/leak", os.O_RDONLY)))
         if r >= 0]
print("found:", found)
"""


@pytest.fixture(scope="module", params=ALL)
def sb(request: pytest.FixtureRequest, state_dir: Path, template: Path, image_layers: list[Path],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    cfg = make_config(request.param, state_dir, template, tmp_path_factory.mktemp(f"run-{request.param}"),
                      image_layers=image_layers)
    with Sandbox(cfg) as s:
        yield s


def snapshot(s: Sandbox) -> str:
    r = s.exec(["python3", "-c", SNAPSHOT])
    assert r.exit_code == 0, r
    return r.text


@pytest.mark.timeout(60)
def test_a_file_left_in_dev_is_gone_after_reset(sb: Sandbox) -> None:
    sb.exec("echo from-episode-1 > /dev/leak; mkdir /dev/dir; echo x > /dev/shm/leak")
    sb.reset()
    r = sb.exec("cat /dev/leak || ls -d /dev/dir || ls /dev/shm")
    assert r.stdout == b"", r


@pytest.mark.timeout(60)
def test_dev_fd_and_stdin_cannot_be_replaced_for_later_verifiers(sb: Sandbox) -> None:
    sb.exec("rm -rf /dev/fd /dev/stdin; mkdir /dev/fd && echo same > /dev/fd/63 && echo same > /dev/fd/62;"
            "echo attacker > /dev/evil; ln -s /dev/evil /dev/stdin")
    sb.reset()
    assert sb.exec("bash -c 'diff <(echo a) <(echo b)'").exit_code == 1  # different: diff says so
    assert sb.exec("bash -c 'cat <(echo X)'").text == "X\n"
    assert sb.exec("cat /dev/stdin", stdin="verifier input\n").text == "verifier input\n"


@pytest.mark.timeout(60)
def test_ipc_objects_do_not_survive_a_reset(sb: Sandbox) -> None:
    sb.exec(POISON)
    sb.reset()
    r = sb.exec(["python3", "-c", LOOK])
    assert r.text == "found: []\n", r
    if sb.mode == "bwrap":  # a namespace of its own: nothing at all in it
        assert sb.exec("ipcs -a | grep -c sandbox; ls /dev/mqueue").text == "0\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", ALL)
def test_namespace_sysctls_are_back_to_their_start_values(mode: str, state_dir: Path, template: Path,
                                                          tmp_path: Path, image_layers: list[Path]) -> None:
    cfg = make_config(mode, state_dir, template, tmp_path, image_layers=image_layers)
    with Sandbox(cfg) as s:  # fresh: no earlier test's poison
        start = snapshot(s)
        s.exec(POISON)
        s.reset()
        after = snapshot(s)
        assert [line for line in after.splitlines() if "=" in line] == [
            line for line in start.splitlines() if "=" in line]
        assert s.exec("python3 -c 'import os; [os.fork() or os._exit(0) for _ in range(50)]'").exit_code == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ALL)
def test_a_pooled_sandbox_is_indistinguishable_from_a_fresh_one(mode: str, state_dir: Path, template: Path,
                                                               tmp_path: Path, image_layers: list[Path]) -> None:
    cfg = make_config(mode, state_dir, template, tmp_path, pool_size=1, pool_max=1,
                      image_layers=image_layers)
    with SandboxPool(cfg) as pool:
        first = pool.acquire()
        fresh = snapshot(first)
        first.exec(POISON)
        pool.release(first)  # reset, then served again
        again = pool.acquire()
        assert again.id == first.id and again.warm
        assert snapshot(again) == fresh
        assert again.exec(["python3", "-c", LOOK]).text == "found: []\n"
        pool.release(again)


PIN_DEV = "head -c 170M /dev/zero > /dev/pin"
PIN_SHM = """python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
shm = libc.shmget(0, 170 << 20, 0o1600)
assert shm >= 0, ctypes.get_errno()
ctypes.memset(libc.shmat(shm, None, 0), 1, 170 << 20)
'"""
ALLOCATE = ["python3", "-c", "b = b'\\x01' * (100 << 20); print(len(b) >> 20)"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("pin", [PIN_DEV, PIN_SHM], ids=["dev", "sysv-shm"])
@pytest.mark.parametrize("mode", ALL)
def test_memory_pinned_by_one_episode_is_not_charged_to_the_next(mode: str, pin: str, state_dir: Path, template: Path,
                                                                 tmp_path: Path, image_layers: list[Path]) -> None:
    # cgroup memory = memory_mb + disk_mb = 224 MiB: room for 100 MiB, not for 170 + 100.
    limits = tight_limits().model_copy(update={"memory_mb": 160, "disk_mb": 64, "address_space_mb": 0,
                                               "cpu_time_s": 10, "file_size_mb": 256})
    with Sandbox(make_config(mode, state_dir, template, tmp_path, limits=limits, image_layers=image_layers)) as s:
        if "memory" not in s.cgroup_controllers:
            pytest.skip("no memory cgroup on this host")
        assert s.exec(ALLOCATE).text == "100\n"  # fits on its own
        s.exec(pin)
        s.reset()
        r = s.exec(ALLOCATE)
        assert r.exit_code == 0 and r.text == "100\n", r


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ALL)
def test_disk_mb_bounds_every_writable_filesystem(mode: str, state_dir: Path, template: Path,
                                                  tmp_path: Path, image_layers: list[Path]) -> None:
    limits = Limits(memory_mb=128, disk_mb=64, file_size_mb=1024, wall_time_s=30)
    cfg: SandboxConfig = make_config(mode, state_dir, template, tmp_path, limits=limits, cgroups=False,
                                       image_layers=image_layers)
    with Sandbox(cfg) as s:
        places = ["/dev", "/dev/shm", "/dev/mqueue", "$TMPDIR", "."]
        script = "".join(f"head -c 100M /dev/zero > {p}/fill 2>/dev/null; " for p in places)
        s.exec(script)
        sizes = s.exec("du -cb " + " ".join(f"{p}/fill" for p in places) + " 2>/dev/null | tail -1").text
        assert int(sizes.split()[0]) <= (64 << 20) + 4096, sizes  # + a POSIX queue's attribute text
    disk = next(f for f in check(cfg) if f.name == "disk limit")  # as root, Landlock mode's folder is a tmpfs too
    assert disk.ok and "64 MiB" in disk.detail, disk


@pytest.mark.timeout(60)
def test_check_reports_an_unbounded_writable_filesystem(state_dir: Path, template: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`temper sandbox check` measures what a command can write to: with /dev left writable (the
    old layout: a tmpfs of half the RAM) it must not claim that disk_mb is in force."""
    from temper.sandbox import bwrap

    plan = bwrap.plan

    def writable_dev(*a: object, **kw: object) -> tuple[list[str], object]:
        argv, p = plan(*a, **kw)  # type: ignore[arg-type]
        return _without_dev_remount(argv), p

    monkeypatch.setattr(bwrap, "plan", writable_dev)
    cfg = make_config("bwrap", state_dir, template, tmp_path, limits=Limits(disk_mb=64), cgroups=False)
    disk = next(f for f in check(cfg) if f.name == "disk limit")
    assert not disk.ok and "/dev " in disk.detail, disk


def _without_dev_remount(argv: list[str]) -> list[str]:
    out, i = [], 0
    while i < len(argv):
        if argv[i] == "--remount-ro" and argv[i + 1] == "/dev":
            i += 2
            continue
        out.append(argv[i])
        i += 1
    return out


@pytest.mark.timeout(60)
def test_mountinfo_does_not_name_the_checkout(state_dir: Path, template: Path, tmp_path: Path) -> None:
    import temper

    checkout = str(Path(temper.__file__).resolve().parents[1])
    with Sandbox(make_config("bwrap", state_dir, template, tmp_path)) as s:
        r = s.exec("cat /proc/self/mountinfo")
        assert r.exit_code == 0 and checkout not in r.text, r.text
        assert s.exec("echo ok").text == "ok\n"
