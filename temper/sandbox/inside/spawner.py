"""A restricted helper that starts commands with posix_spawn (vfork) instead of fork.

A fork of the supervisor must wait its turn on a busy CPU and copy-on-write its way to exec
(4-7 ms on a loaded 2-core host; posix_spawn: ~0.5 ms). posix_spawn cannot run code between
fork and exec, so the restrictions are applied once, to this helper, and inherited: rlimits,
no_new_privs, Landlock and the seccomp filter (RLIMIT_CPU, which counts from process start, is
set per command with prlimit). It is also the subreaper of every command, and kills and reaps
what they leave. A command may kill it (same uid): the supervisor then starts another.
"""

import _signal as signal  # the C module: signal's enums would cost a cold start ~3 ms
import _socket as socket  # the C module: socket.py imports enum and selectors (a cold start's ms)
import fcntl
import os
import resource
import struct
import termios

import imageroot
import native
import proc
import wire

MAX_MESSAGE = 128 * 1024
# A container runtime's default capabilities for root (Docker's, Podman's): chown, dac_override, fowner,
# fsetid, kill, setgid, setuid, setpcap, net_bind_service, net_raw, sys_chroot, mknod, audit_write, setfcap.
CONTAINER_CAPS = frozenset({0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31})


class Spawner:
    """The supervisor's end. `spawn` returns the command's pid; its exit comes on `fileno()`."""

    def __init__(self, jail: object):
        self.jail = jail
        self.sock: socket.socket | None = None
        self.pid = 0
        self.start()

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            try:
                _serve(theirs, self.jail)
            except BaseException as exc:
                os.write(2, f"temper-sandbox spawner: {type(exc).__name__}: {exc}\n".encode())
            finally:
                os._exit(0)
        theirs.close()
        self.sock, self.pid = ours, pid

    def fileno(self) -> int:
        assert self.sock is not None
        return self.sock.fileno()

    def _ask(self, msg: dict, fds: tuple[int, ...] = ()) -> dict | None:
        data = wire.dumps(msg).encode()
        if self.sock is None:
            return None
        try:
            _send_fds(self.sock, [data], list(fds))
        except OSError:
            return None
        return self.receive(timeout=30.0)

    def receive(self, timeout: float | None = None) -> dict | None:
        """The next message; None when the helper has died or did not answer within `timeout`
        (then it is killed: the caller cleans up and starts another)."""
        if self.sock is None:
            return None
        try:
            self.sock.settimeout(timeout)
            data = self.sock.recv(MAX_MESSAGE)
        except OSError:  # a timeout included
            data = b""
        if not data:
            self.stop()
            return None
        return wire.loads(data)

    def spawn(self, exe: str, argv: list, env: dict, cwd: str, fds: tuple[int, int, int], cpu: tuple,
              user: str | None = None) -> dict | None:
        """{"pid"} or {"error", "code"}; None when the helper is gone (the caller forks instead)."""
        msg = {"op": "spawn", "exe": exe, "argv": argv, "env": env, "cwd": cwd, "cpu": cpu, "user": user}
        if len(wire.dumps(msg)) > MAX_MESSAGE - 1024:
            return None
        return self._ask(msg, fds)

    def pty(self, argv: list, env: dict, cwd: str, user: str | None) -> tuple[int, int]:
        """Start a shell on a new pseudo-terminal: (its pid, the terminal's master fd, ours to read and write)."""
        if self.sock is None:
            self.start()
        assert self.sock is not None
        _send_fds(self.sock, [wire.dumps({"op": "pty", "argv": argv, "env": env, "cwd": cwd,
                                                "user": user}).encode()], [])
        self.sock.settimeout(30.0)
        data, fds, _, _ = _recv_fds(self.sock, MAX_MESSAGE, 1)
        reply = wire.loads(data) if data else {"error": "the spawner died"}
        if "error" in reply:
            raise OSError(0, f"cannot start a shell: {reply['error']}")
        return reply["pid"], fds[0]

    def cleanup(self) -> bool:
        """Kill and reap every process the commands left; False when the helper is gone."""
        return self._ask({"op": "cleanup"}) is not None

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.pid:
            try:  # noqa: SIM105 - contextlib would cost start-up time here
                os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
            self.pid = 0  # reaped with the other children (we are pid 1, or a subreaper)


def _serve(sock: socket.socket, jail: object) -> None:
    """The helper: restrict ourselves once, then start, wait for and clean up after commands."""
    image = jail.kill == "image"
    if image:  # into the image's root, in a mount namespace of our own (imageroot.py)
        imageroot.enter()
    for res, soft, hard in jail.rlimits:
        if res != resource.RLIMIT_CPU:
            resource.setrlimit(res, (soft, hard))
    cpu = [(s, h) for r, s, h in jail.rlimits if r == resource.RLIMIT_CPU]
    proc.prefer_for_oom_kill()  # inherited by every command
    if not proc.kill_all_is_safe(jail.kill, os.getppid()):
        return  # the supervisor falls back to forking (see proc.kill_leftovers)
    native.prctl(native.PR_SET_CHILD_SUBREAPER, 1)
    if not image:  # in an image, setuid programs (su, sudo) must work: root there is no one outside
        native.prctl(native.PR_SET_NO_NEW_PRIVS, 1)
    if jail.landlock_fd is not None:
        native.landlock_restrict(jail.landlock_fd)
    if jail.seccomp is not None:
        jail.seccomp.install()  # in an image, with CAP_SYS_ADMIN in our user namespace instead of no_new_privs
    if image:
        native.limit_capabilities(CONTAINER_CAPS)  # root's commands get a container runtime's default set
    native.prctl(native.PR_SET_DUMPABLE, 0)
    shell: tuple[int, bytes | None] = (0, None)  # the interactive shell: (pid, started_at), spared by sweeps
    while True:
        try:
            data, fds, _, _ = _recv_fds(sock, MAX_MESSAGE, 3)
        except OSError:
            return
        if not data:
            return
        for fd in fds:  # SCM_RIGHTS fds arrive inheritable: only their dup2 copies on 0-2 may reach the command
            os.set_inheritable(fd, False)
        msg = wire.loads(data)
        if msg["op"] == "cleanup":
            _sweep(jail.kill)  # the shell too: this is a reset
            shell = (0, None)
            sock.send(b"{}")
            continue
        if msg["op"] == "pty":  # a shell on a terminal of its own, left running: the supervisor keeps its master
            try:
                pid, master = _pty_shell(msg, image)
                shell = (pid, proc.started_at(pid))
            except (OSError, KeyError) as exc:
                sock.send(wire.dumps({"error": str(exc).strip('"')}).encode())
                continue
            _send_fds(sock, [wire.dumps({"pid": pid}).encode()], [master])
            os.close(master)
            continue
        try:
            if image:
                pid = _fork_exec(msg, fds)
            else:
                os.chdir(msg["cwd"])
                actions = [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds)]
                pid = os.posix_spawn(msg["exe"], msg["argv"], msg["env"], file_actions=actions, setsid=True,
                                     setsigdef=proc.DEFAULT_SIGNALS)
        except (OSError, KeyError) as exc:
            code = 127 if getattr(exc, "errno", None) == 2 else 126
            sock.send(wire.dumps({"error": str(exc).strip('"'), "code": code}).encode())
            continue
        finally:
            for fd in fds:
                os.close(fd)
        if cpu:
            try:  # noqa: SIM105 - a command that already exited needs no limit
                resource.prlimit(pid, resource.RLIMIT_CPU, cpu[0])
            except OSError:
                pass
        sock.send(wire.dumps({"pid": pid}).encode())
        _, status, usage = os.wait4(pid, 0)
        if image:  # what it left running keeps running, as in a container; orphans that ended are reaped
            _reap_orphans()
        else:
            _sweep(jail.kill, shell)  # what it left running dies now: one message instead of a second request
        sock.send(wire.dumps({"status": status, "cpu_s": usage.ru_utime + usage.ru_stime,
                              "maxrss_kb": usage.ru_maxrss, "swept": not image}).encode())


def _sweep(mode: str, shell: tuple[int, bytes | None] = (0, None)) -> None:
    """kill(-1) reaches every process of our uid that we may signal but ourselves and pid 1:
    the commands' (the supervisor is pid 1, or outside our Landlock domain). We are their
    subreaper, so we then reap them all. While the interactive shell runs (its pid and start time still
    match `shell`), its session is spared: its jobs outlive each exec, until a reset."""
    if not proc.kill_all_is_safe(mode, os.getppid()):  # never as root, never outside a sandbox
        raise RuntimeError(f"refusing kill(-1) here (mode {mode}, uid {os.getuid()})")
    if shell[0] and proc.started_at(shell[0]) == shell[1]:
        proc.kill_all_but_session(shell[0])
        return
    for _ in range(2):
        try:  # noqa: SIM105 - contextlib would cost start-up time here
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.reap_all()


def _pty_shell(msg: dict, image: bool) -> tuple[int, int]:
    """A login-less interactive shell whose controlling terminal is a new pseudo-terminal; (pid, master)."""
    ids = _ids(msg.get("user") or "") if image else None
    env = dict(msg["env"])
    if ids is not None and "HOME" not in env:
        env["HOME"] = ids[3]
    master, slave = os.openpty()
    pid = os.fork()
    if pid:
        os.close(slave)
        return pid, master
    try:
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        proc.default_signals()
        for i in range(3):
            os.dup2(slave, i)
        os.closerange(3, 1 << 16)
        if ids is not None:
            os.setgroups(ids[2])
            os.setgid(ids[1])
            os.setuid(ids[0])
        os.chdir(msg["cwd"])
        _execvpe(msg["argv"], env)
    except BaseException as exc:
        os.write(2, f"temper-sandbox: cannot start the shell: {exc}\n".encode(errors="replace"))
    os._exit(126)


def _which(name: str, env: dict) -> str:
    """The program `name` on the image's PATH (a FileNotFoundError, exit 127, if it is on none of it)."""
    if "/" in name:
        return name
    for d in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        path = os.path.join(d or ".", name)
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    raise FileNotFoundError(2, "command not found", name)


def _execvpe(argv: list, env: dict) -> None:
    """os.execvpe without its lazy `import warnings`: in an image no module can be loaded after the pivot."""
    name = argv[0]
    if "/" in name:
        os.execve(name, argv, env)
    err: OSError = FileNotFoundError(2, "command not found", name)
    for d in env.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(":"):
        try:
            os.execve(os.path.join(d or ".", name), argv, env)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:  # e.g. EACCES: remember it, as execvp does, and go on looking
            err = exc
    raise err


def _reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _fork_exec(msg: dict, fds: list) -> int:
    """An image's command, as the image's USER (or the request's), in its WORKDIR, found on its PATH inside the
    image: by posix_spawn as root (as we are), else forked to change users first (posix_spawn cannot)."""
    uid, gid, groups, home = _ids(msg.get("user") or "")
    env = msg["env"] if "HOME" in msg["env"] else {**msg["env"], "HOME": home}
    if (uid, gid) == (0, 0) and set(groups) <= {0}:
        os.chdir(msg["cwd"])
        actions = [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(fds)]
        return os.posix_spawn(_which(msg["argv"][0], env), msg["argv"], env, file_actions=actions, setsid=True,
                              setsigdef=proc.DEFAULT_SIGNALS)
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()
        proc.default_signals()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        os.closerange(3, 1 << 16)
        os.setgroups(groups)
        os.setgid(gid)
        os.setuid(uid)
        os.chdir(msg["cwd"])
        _execvpe(msg["argv"], env)
    except BaseException as exc:
        os.write(2, f"temper-sandbox: cannot run {msg['argv'][0]}: {exc}\n".encode(errors="replace"))
        os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    os._exit(126)


def _ids(user: str) -> tuple[int, int, list[int], str]:
    """uid, gid, supplementary groups and home of an image's USER (`name`, `uid`, `name:group`, `uid:gid`),
    read from the image's own /etc/passwd and /etc/group (not through NSS: its modules are the image's)."""
    name, _, group = user.partition(":")
    passwd = _table("/etc/passwd")
    row = next((r for r in passwd if r[0] == name or (name.isdigit() and r[2] == name)), None) if name else \
        next((r for r in passwd if r[2] == "0"), None)
    if row is None and not (name.isdigit() or not name):
        raise KeyError(f"user {name!r} is not in the image's /etc/passwd")
    uid = int(row[2]) if row else int(name or 0)
    gid = int(row[3]) if row else uid
    home = row[5] if row and len(row) > 5 else "/"
    groups_table = _table("/etc/group")
    if group:
        hit = next((r for r in groups_table if r[0] == group or r[2] == group), None)
        if hit is None and not group.isdigit():
            raise KeyError(f"group {group!r} is not in the image's /etc/group")
        gid = int(hit[2]) if hit else int(group)
    login = row[0] if row else None
    extra = sorted({int(r[2]) for r in groups_table if login and len(r) > 3 and login in r[3].split(",")} | {gid})
    return uid, gid, extra, home


def _table(path: str) -> list[list[str]]:
    try:
        with open(path) as f:
            return [line.rstrip("\n").split(":") for line in f if line.count(":") >= 2]
    except OSError:
        return []


def _send_fds(sock: socket.socket, buffers: list[bytes], fds: list[int]) -> None:
    """socket.send_fds, on the C module's socket."""
    sock.sendmsg(buffers, [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack(f"{len(fds)}i", *fds))] if fds else [])


def _recv_fds(sock: socket.socket, bufsize: int, maxfds: int) -> tuple[bytes, list[int], int, object]:
    """socket.recv_fds, on the C module's socket."""
    fds: list[int] = []
    msg, ancdata, flags, addr = sock.recvmsg(bufsize, socket.CMSG_LEN(maxfds * 4))
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds += struct.unpack(f"{len(data) // 4}i", data[:len(data) - len(data) % 4])
    return msg, fds, flags, addr
