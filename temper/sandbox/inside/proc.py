"""Run one command under the sandbox's limits, capture bounded output, then kill what is left.

Commands start through the restricted spawner (posix_spawn) where there is one; otherwise the
forked child sets its own rlimits, Landlock and seccomp before exec. Either way the
supervisor itself stays unrestricted (it is trusted code; the command is not).
"""

import _signal as signal  # the C module: signal's enums would cost a cold start ~3 ms
import os
import resource
import select
import time

import native

CHUNK = 1 << 16
# Every command starts with every signal at its default action, as in a container. Python ignores SIGPIPE
# and SIGXFSZ, and an ignored signal passes through exec: a host run in the background (SIGINT, SIGQUIT) or
# under nohup (SIGHUP) would otherwise hand its sandboxes commands that Ctrl-C cannot stop.
DEFAULT_SIGNALS = tuple(sorted(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}))


def default_signals() -> None:
    """In a forked child before exec: every signal back to its default action (see DEFAULT_SIGNALS)."""
    for sig in DEFAULT_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


class Jail:
    """What every command gets: limits, filters, and how leftovers are found and killed."""

    def __init__(self, rlimits: list, output_bytes: int, kill: str, seccomp: "native.SeccompProgram | None" = None,
                 landlock_fd: "int | None" = None):
        self.rlimits = rlimits  # (resource, soft, hard)
        self.output_bytes = output_bytes
        self.kill = kill  # "ns": we are pid 1 of a pid namespace; "uid": a uid of our own; "tree": descendants
        self.seccomp = seccomp
        self.landlock_fd = landlock_fd
        self.spawner = None  # a spawner.Spawner, when the supervisor started one
        self.cancel_fd = -1  # the host writes a running command's sequence number here to interrupt it


def run(jail: Jail, argv: list[str], env: dict[str, str], cwd: str, stdin: bytes | None,
        timeout: float, seq: int | None = None, user: str | None = None) -> tuple[dict, bytes, bytes]:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    in_r, in_w = os.pipe() if stdin else (os.open("/dev/null", os.O_RDONLY), -1)
    start = time.monotonic()
    launch = _Spawned(jail, argv, env, cwd, (in_r, out_w, err_w), user) if jail.spawner else None
    if jail.kill == "image" and launch is not None and launch.pid <= 0 and launch.failure is None:
        # a command killed the spawner: an image's commands start from a new one, never from us (we see the
        # sandbox's outer view, with every capability of its user namespace)
        launch = _Spawned(jail, argv, env, cwd, (in_r, out_w, err_w), user)
        if launch.pid <= 0 and launch.failure is None:
            launch.failure, launch.code = "temper-sandbox: the sandbox's command starter died; reset it\n", 126
    if launch is None or (launch.pid <= 0 and launch.failure is None):
        launch = _Forked(jail, argv, env, cwd, (in_r, out_w, err_w))
    for fd in (out_w, err_w, in_r):
        os.close(fd)
    pid, done_fd = launch.pid, launch.done_fd
    bufs = {out_r: bytearray(), err_r: bytearray()}
    cut = {out_r: False, err_r: False}
    poller = select.poll()
    for fd in bufs:
        poller.register(fd, select.POLLIN)
    if launch.failure is not None:  # could not start it (not found, not executable): as a shell says
        bufs[err_r] += launch.failure.encode()
    else:
        poller.register(done_fd, select.POLLIN)
    pending = memoryview(stdin or b"")
    if in_w >= 0:
        os.set_blocking(in_w, False)
        poller.register(in_w, select.POLLOUT)
    if seq is not None and jail.cancel_fd >= 0:
        poller.register(jail.cancel_fd, select.POLLIN)
    timed_out = interrupted = False
    live = set(bufs)
    while launch.failure is None and not interrupted:
        left = start + timeout - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        events = poller.poll(left * 1000)
        if any(fd == done_fd for fd, _ in events):
            break
        for fd, ev in events:
            if fd == jail.cancel_fd:
                interrupted = seq in _sequence_numbers(fd)  # another command's (ended) interrupt is stale
            elif fd == in_w:
                try:
                    pending = pending[os.write(in_w, pending[:CHUNK]):]
                except BlockingIOError:
                    pass
                except BrokenPipeError:
                    pending = pending[:0]  # the command closed its stdin: the rest is dropped
                if not pending or ev & (select.POLLERR | select.POLLHUP):
                    poller.unregister(in_w)
                    os.close(in_w)
                    in_w = -1
            elif fd in live:
                _read(fd, bufs, cut, jail.output_bytes, live, poller)
    if in_w >= 0:
        os.close(in_w)
    if timed_out or interrupted:
        _kill_quietly(pid)
    status, cpu_s, maxrss = launch.wait(killed=timed_out or interrupted)
    duration = time.monotonic() - start
    persist = jail.kill == "image"  # an image's processes outlive the command, as in a container
    if not launch.swept and not persist:  # the spawner sweeps as soon as the command ends; a fork we sweep here
        kill_leftovers(jail)
    cleanup_s = time.monotonic() - start - duration
    if persist:  # what is written by now; a process it left behind may hold the pipes open for ever
        _drain(bufs, cut, jail.output_bytes, live, poller)
    for fd in list(live):  # every writer is dead now: this reaches EOF
        while fd in live:
            _read(fd, bufs, cut, jail.output_bytes, live, poller)
    meta = {
        "exit_code": os.waitstatus_to_exitcode(status) if status is not None else launch.code,
        "duration_s": duration,
        "cpu_s": cpu_s,
        "maxrss_kb": maxrss,
        "cleanup_s": cleanup_s,
        "timed_out": timed_out,
        "interrupted": interrupted,
        "stdout_truncated": cut[out_r],
        "stderr_truncated": cut[err_r],
    }
    return meta, bytes(bufs[out_r]), bytes(bufs[err_r])


def _drain(bufs: dict[int, bytearray], cut: dict[int, bool], cap: int, live: set[int], poller: select.poll,
           quiet_s: float = 0.02, most_s: float = 0.5) -> None:
    """Read until the pipes close or stay quiet for `quiet_s` (at most `most_s`), then close them: a server
    the command started in the background keeps them, and writes into a closed pipe after that."""
    end = time.monotonic() + most_s
    while live and time.monotonic() < end:
        events = poller.poll(quiet_s * 1000)
        if not events:
            break
        for fd, _ in events:
            if fd in live:
                _read(fd, bufs, cut, cap, live, poller)
    for fd in list(live):
        poller.unregister(fd)
        os.close(fd)
        live.discard(fd)


def _read(fd: int, bufs: dict[int, bytearray], cut: dict[int, bool], cap: int, live: set[int],
          poller: select.poll) -> None:
    data = os.read(fd, CHUNK)
    if data:
        buf = bufs[fd]
        room = cap - len(buf)
        buf += data[:room]
        if len(data) <= room:
            return
        cut[fd] = True
    # EOF, or past the cap: stop reading; a writer that goes on gets SIGPIPE instead of filling memory.
    poller.unregister(fd)
    os.close(fd)
    live.discard(fd)


def _sequence_numbers(fd: int) -> list[int]:
    """The interrupts the host wrote (4-byte sequence numbers, each written whole); none if none is there."""
    try:
        data = os.read(fd, 4096)
    except BlockingIOError:
        return []
    return [int.from_bytes(data[i:i + 4], "little") for i in range(0, len(data) - 3, 4)]


def _kill_quietly(pid: int) -> None:
    for kill in (os.killpg, os.kill):
        try:  # noqa: SIM105 - contextlib would cost start-up time here
            kill(pid, signal.SIGKILL)
        except OSError:
            pass


class _Forked:
    """A command started by fork: the child restricts itself, then execs."""

    failure: "str | None" = None
    code = 0
    swept = False

    def __init__(self, jail: Jail, argv: list, env: dict, cwd: str, fds: tuple[int, int, int]):
        self.pid = os.fork()
        if self.pid == 0:
            _child(jail, argv, env, cwd, *fds)
        self.done_fd = os.pidfd_open(self.pid)

    def wait(self, killed: bool = False) -> tuple:
        _, status, usage = os.wait4(self.pid, 0)
        os.close(self.done_fd)
        return status, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


class _Spawned:
    """A command started by the spawner, which waits for it and tells us how it ended."""

    def __init__(self, jail: Jail, argv: list, env: dict, cwd: str, fds: tuple[int, int, int],
                 user: str | None = None):
        self.jail, self.pid, self.failure, self.code, self.swept = jail, 0, None, 0, False
        if jail.spawner.sock is None:  # stopped earlier (it had died or hung)
            jail.spawner.start()
        self.done_fd = jail.spawner.fileno()
        try:
            if not argv:
                raise IndexError("empty argv")
            # an image's commands are found on its PATH by the spawner, which alone sees the image's root
            exe = "" if jail.kill == "image" else _which(argv[0], env.get("PATH", "/usr/bin:/bin"))
        except (OSError, IndexError) as exc:
            self.failure, self.code = f"temper-sandbox: cannot run {argv[0] if argv else '(empty argv)'}: {exc}\n", 127
            return
        cpu = next(([s, h] for r, s, h in jail.rlimits if r == resource.RLIMIT_CPU), None)
        reply = jail.spawner.spawn(exe, argv, env, cwd, fds, cpu, user)
        if reply is None:  # the spawner is gone (a command killed it): fork this one, restart it after
            return
        if "error" in reply:
            self.failure, self.code = f"temper-sandbox: cannot run {argv[0]}: {reply['error']}\n", reply["code"]
            return
        self.pid = reply["pid"]

    def wait(self, killed: bool = False) -> tuple:
        if self.failure is not None:
            return None, 0.0, 0
        msg = self.jail.spawner.receive(timeout=10.0 if killed else None)
        if msg is None:  # the spawner died while waiting: the command is killed with everything else
            _kill_quietly(self.pid)
            self.code = -signal.SIGKILL
            return None, 0.0, 0
        self.swept = bool(msg.get("swept"))
        return msg["status"], msg["cpu_s"], msg["maxrss_kb"]


def kill_leftovers(jail: Jail) -> None:
    """Kill every process the command started (daemonised grandchildren too) and reap them."""
    if jail.spawner is not None:
        if jail.spawner.cleanup():
            return
        jail.spawner.stop()  # killed by a command: clean up ourselves, then start a new one
        _kill_all(jail)
        jail.spawner.start()
        return
    _kill_all(jail)


def kill_all_is_safe(mode: str, init_pid: int) -> bool:
    """kill(-1) sweeps only where it reaches nothing but the sandbox: inside its own pid namespace
    (`init_pid` is 1: we are pid 1, or its child), or under a dedicated non-root uid. Run as root
    on a host, kill(-1) kills every process of the machine; this guard makes that impossible."""
    if mode == "image":  # root, but of a user namespace of its own and pid 1 (or its child) of its own pid namespace
        return init_pid == 1 and not _initial_user_namespace()
    if os.getuid() == 0 or os.geteuid() == 0:
        return False
    return (mode == "ns" and init_pid == 1) or mode == "uid"


def _initial_user_namespace() -> bool:
    try:
        with open("/proc/self/uid_map") as f:
            return f.read().split() == ["0", "0", "4294967295"]
    except OSError:
        return True


def _kill_all(jail: Jail) -> None:
    if jail.kill in ("ns", "uid", "image") and not kill_all_is_safe(jail.kill, os.getpid()):
        raise RuntimeError(f"refusing kill(-1) here (mode {jail.kill}, uid {os.getuid()}, pid {os.getpid()})")
    if jail.kill in ("uid", "image"):
        # Under a uid used by this sandbox alone, one kill(-1) sweep reaches every process the
        # command started (a fork racing it fails: its parent already has SIGKILL pending);
        # being a subreaper, we then reap them all. A second sweep is a cheap belt and braces.
        for _ in range(2):
            try:  # noqa: SIM105 - contextlib would cost start-up time here
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            reap_all()
        return
    for _ in range(5000):
        victims = _victims(jail.kill)
        if not victims:
            return
        for pid in victims:
            if pid > 0:
                _kill_quietly(pid)
        if not _reap():
            time.sleep(0.0002)  # SIGKILLed processes take a moment to become zombies


def started_at(pid: int) -> bytes | None:
    """When process `pid` started (clock ticks since boot, from /proc): with its pid, a process's identity,
    which a pid alone is not once the pid is reused. None if there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def kill_all_but_session(session: int, deadline_s: float = 5.0) -> None:
    """Kill and reap every process of the sandbox but pid 1, us and those of session `session` (the
    interactive shell and its jobs, which outlive each exec). kill(-1) would take the shell too, so: scan,
    kill, reap, until a scan finds no one. It ends: a SIGKILLed process forks no more, and what one forked
    before it died is found by the next scan. A process stuck in uninterruptible I/O is left at `deadline_s`."""
    me, end = os.getpid(), time.monotonic() + deadline_s
    while True:
        _reap()
        left = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (1, me):
                try:
                    with open(f"/proc/{name}/stat", "rb") as f:
                        state, _, _, sid = f.read().rsplit(b")", 1)[1].split()[:4]
                    if state != b"Z" and int(sid) != session:  # a zombie is dead: its parent or we reap it
                        left.append(int(name))
                except (OSError, IndexError, ValueError):
                    continue  # gone meanwhile
        if not left or time.monotonic() > end:
            return
        for pid in left:
            _kill_quietly(pid)
        time.sleep(0.0002)  # SIGKILLed processes take a moment to become zombies


def _victims(mode: str) -> list[int]:
    """Signal what is left; return what may still be alive ([0]: something, pids unknown)."""
    if mode == "ns":
        # As pid 1 of our own pid namespace, kill(-1) reaches every other process in it, in one
        # sweep that a fork bomb cannot outrun; ESRCH once none is left.
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            return []
        return [0]
    return _descendants(os.getpid())


def _descendants(root: int) -> list[int]:
    """Our descendants, from /proc (we are a subreaper, so orphans come back to us)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _reap() -> bool:
    """Reap the zombie children there are now; True if any was reaped."""
    reaped = False
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped = True


def reap_all(deadline_s: float = 5.0) -> None:
    """Reap children until there are none, for at most `deadline_s`: a SIGKILLed process stuck in
    uninterruptible I/O (a loaded host paging) must not hang the sandbox; it is reaped later."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end:
                return
            time.sleep(0.0002)


def _child(jail: Jail, argv: list[str], env: dict[str, str], cwd: str, in_r: int, out_w: int, err_w: int) -> None:
    try:
        os.setsid()
        default_signals()
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for res, soft, hard in jail.rlimits:
            resource.setrlimit(res, (soft, hard))
        prefer_for_oom_kill()
        os.chdir(cwd)
        native.prctl(native.PR_SET_NO_NEW_PRIVS, 1)
        if jail.landlock_fd is not None:
            native.landlock_restrict(jail.landlock_fd)
        os.closerange(3, 1 << 16)
        exe = _which(argv[0], env.get("PATH", "/usr/bin:/bin"))
        if jail.seccomp is not None:
            jail.seccomp.install()
        os.execve(exe, argv, env)
    except BaseException as exc:
        msg = f"temper-sandbox: cannot run {argv[0] if argv else '(empty argv)'}: {exc}\n"
        os.write(2, msg.encode(errors="replace"))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    os._exit(126)


def prefer_for_oom_kill() -> None:
    """Under memory pressure the command dies, not the supervisor. Our /proc files belong to
    root while we are not dumpable (the supervisor's setting, inherited), so lift it meanwhile."""
    native.prctl(native.PR_SET_DUMPABLE, 1)
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    native.prctl(native.PR_SET_DUMPABLE, 0)


def _which(name: str, path: str) -> str:
    if "/" in name:
        return name
    for d in path.split(":"):
        cand = os.path.join(d or ".", name)
        if os.access(cand, os.X_OK) and not os.path.isdir(cand):
            return cand
    raise FileNotFoundError(2, "command not found", name)
