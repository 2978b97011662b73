"""The in-sandbox supervisor's work: set the sandbox up once, then serve requests from the host.

Started by the host (through bwrap, or directly in Landlock/none mode) with the protocol on
stdin/stdout. It forks one child per command, so a command in a warm sandbox costs a fork
and an exec. It never runs agent code itself; every child is limited and filtered.
"""

import _signal as signal  # the C module: signal's enums would cost a cold start ~3 ms
import errno
import os
import resource
import select
import time

import fsops
import imageroot
import kernel_state
import native
import proc
import spawner
import wire

MEMORY_MARKS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")
FORK_MARKS = (b"fork: Resource temporarily unavailable", b"fork: retry", b"can't fork", b"Cannot fork")
RLIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "nproc": resource.RLIMIT_NPROC,
           "fsize": resource.RLIMIT_FSIZE, "nofile": resource.RLIMIT_NOFILE, "core": resource.RLIMIT_CORE,
           "msgqueue": resource.RLIMIT_MSGQUEUE}


class SupervisorServer:
    def __init__(self, init: dict, bpf: bytes):
        self.init = init
        self.cpu_s: int = init["cpu_s"]
        image = init["mode"] == "image"
        self.folders = imageroot.ImageFolders(init["folders"]) if image else fsops.Folders(init["folders"])
        self.template_fd: int | None = None
        self.dirty = False  # an exec failed before killing what it started
        self.sh: tuple[int, int] | None = None  # the interactive shell: (pid, its terminal's master fd)
        self.mqueue = False  # /dev/mqueue mounted: POSIX queues to remove at reset
        # The sandbox's SysV objects in a shared (host) IPC namespace: those of its dedicated uid only.
        self.ipc_owner: int | None = os.getuid() if init["kill"] == "uid" else None
        if init["mode"] == "bwrap":
            self._enter_own_namespaces()
            self.mqueue = kernel_state.seal_namespace()
        elif image:  # root of a user namespace of our own already (bwrap's, mapped by the host)
            self.mqueue = kernel_state.seal_namespace()
        else:
            native.prctl(native.PR_SET_CHILD_SUBREAPER, 1)  # orphans come back to us, to be killed
        troot = init.get("template_root")
        if troot and os.path.isdir(troot):
            self.template_fd = os.open(troot, os.O_DIRECTORY | os.O_RDONLY)  # still usable once hidden
        self.folders.build()
        landlock = init.get("landlock")
        self.jail = proc.Jail(
            rlimits=[(RLIMITS[k], s, h) for k, s, h in init["rlimits"]],
            output_bytes=init["output_bytes"],
            kill=init["kill"],
            seccomp=native.SeccompProgram(bpf) if bpf else None,
            landlock_fd=native.landlock_ruleset(landlock["read"], landlock["write"]) if landlock else None,
        )
        if init.get("cancel_fd", -1) >= 0:
            self.jail.cancel_fd = init["cancel_fd"]
            os.set_blocking(self.jail.cancel_fd, False)
            os.set_inheritable(self.jail.cancel_fd, False)  # no command may read (swallow) an interrupt
        native.prctl(native.PR_SET_DUMPABLE, 0)  # not ptrace-able, even by a same-uid process
        # The spawner's kill(-1) must spare us: we are pid 1 (bwrap), or outside its Landlock
        # domain where Landlock scopes signals (ABI >= 6). Elsewhere commands are forked.
        if init["kill"] in ("ns", "image") or (init["kill"] == "uid" and landlock and native.landlock_abi() >= 6):
            self.jail.spawner = spawner.Spawner(self.jail)

    def _kill_everything(self) -> None:
        """Image mode: every process of the sandbox but us (we are pid 1 of its pid namespace), the spawner
        too; a new spawner enters the rebuilt root after the reset."""
        if self.jail.spawner is not None:
            self.jail.spawner.stop()
        proc._kill_all(self.jail)
        self.dirty = False

    def _enter_own_namespaces(self) -> None:
        """bwrap gave us no capabilities; a user namespace of our own gives mount rights over our
        own mount namespace only (for the overlays), and rights over an IPC namespace of our own
        (to empty it at reset). Children lose them at exec (non-root uid)."""
        uid, gid = os.getuid(), os.getgid()
        native.unshare(native.CLONE_NEWUSER | native.CLONE_NEWNS | kernel_state.CLONE_NEWIPC)
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")

    def handle(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        op = req["op"]
        if op == "exec":
            return self.exec(req, blob)
        if op == "write":
            self.folders.write(req["path"], blob, req.get("mode", 0o644))
            return {"ok": True}, b""
        if op == "read":
            return {"ok": True}, self.folders.read(req["path"], req["limit"])
        if op == "list":
            entries, truncated = self.folders.listdir(req["path"], req.get("recursive", False))
            return {"entries": entries, "truncated": truncated}, b""
        if op == "reset":
            start = time.monotonic()
            if self.sh is not None:  # the shell goes with the rest
                os.close(self.sh[1])
                self.sh = None
            if self.init["mode"] == "image":  # everything the commands left runs on until now
                self._kill_everything()
            elif self.dirty:  # every exec kills what it started; only an exec that failed midway has not
                proc.kill_leftovers(self.jail)
                self.dirty = False
            if self.ipc_owner is not None or self.init["mode"] in ("bwrap", "image"):
                kernel_state.clear(self.ipc_owner, self.mqueue)
            self.folders.reset(req.get("template"), "template" in req)
            if self.init["mode"] == "image" and self.jail.spawner is not None:
                self.jail.spawner.start()  # into the new root
            return {"ok": True, "overlay": self.folders.overlay, "reset_s": time.monotonic() - start}, b""
        if op == "copy_in":
            self.copy_in(req["key"], req["dest"], req.get("read_only", False))
            return {"ok": True}, b""
        if op == "shell":
            return self.shell(req)
        if op == "ping":
            return {"ok": True, "pid": os.getpid()}, b""
        raise ValueError(f"unknown op {op!r}")

    def shell(self, req: dict) -> tuple[dict, bytes]:
        """The sandbox's one interactive shell (started on first use, on a terminal of its own): type `keys`
        into it (Ctrl-C is "\x03"), then return what it printed since the last call, once it has been quiet
        for `quiet_s` or `wait_s` has passed."""
        if self.jail.spawner is None:
            raise OSError(errno.ENOTSUP, "no shell sessions in this isolation mode (bwrap or image only)")
        started = False
        if self.sh is None or not _running(self.sh[0]):
            if self.sh is not None:
                os.close(self.sh[1])
            pid, fd = self.jail.spawner.pty(req["argv"], req["env"], req["cwd"], req.get("user"))
            os.set_blocking(fd, False)
            self.sh, started = (pid, fd), True
        pid, fd = self.sh
        data = req.get("keys", "").encode()
        while data:
            try:
                data = data[os.write(fd, data):]
            except BlockingIOError:
                select.select([], [fd], [], 1.0)
        out, alive = _read_terminal(fd, req["wait_s"], req["quiet_s"], req["max_bytes"])
        return {"ok": True, "pid": pid, "started": started, "alive": alive and _running(pid)}, out

    def exec(self, req: dict, stdin: bytes) -> tuple[dict, bytes]:
        self.dirty = True
        meta, out, err = proc.run(self.jail, req["argv"], req["env"], req["cwd"],
                                  stdin if req.get("stdin") else None, req["timeout"], req.get("seq"), req.get("user"))
        self.dirty = False
        meta["limit"] = self._limit(meta, err)
        meta["stdout_len"] = len(out)
        return meta, out + err

    def _limit(self, m: dict, err: bytes) -> str | None:
        """Which limit stopped the command, from how it ended (the host adds cgroup evidence)."""
        code = m["exit_code"]
        if any(mark in err for mark in FORK_MARKS):
            return "processes"  # first: a fork bomb also runs out the clock, but this is the cause
        if m["timed_out"]:
            return "wall_time"
        if m.get("interrupted"):
            return "interrupted"
        # A shell reports a child killed by signal N as exit code 128+N, with a message.
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or b"CPU time limit exceeded" in err or (
                code == -signal.SIGKILL and m["cpu_s"] >= self.cpu_s - 0.05):
            return "cpu"
        if code in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ) or (code != 0 and (
                b"File too large" in err or b"File size limit exceeded" in err)):
            return "file_size"
        if m["stdout_truncated"] or m["stderr_truncated"]:
            return "output"
        if code != 0 and any(mark in err for mark in MEMORY_MARKS):
            return "memory"
        if self.folders.disk_full():
            return "disk"
        return None

    def copy_in(self, key: str, dest: str, read_only: bool = False) -> None:
        if self.template_fd is None or "/" in key or key.startswith("."):
            raise FileNotFoundError(2, "no staged folder", key)
        src = f"/proc/self/fd/{self.template_fd}/{key}" if self.init["mode"] == "bwrap" else (
            f"{self.init['template_root']}/{key}")
        self.folders.copy_in(src, dest, read_only)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _read_terminal(fd: int, wait_s: float, quiet_s: float, limit: int) -> tuple[bytes, bool]:
    """What the terminal has to say: read until quiet for `quiet_s` after some output, or `wait_s` in all
    (at most `limit` bytes: the rest stays for the next call). False when the shell's side has closed."""
    out = bytearray()
    end = time.monotonic() + wait_s
    quiet_until = None
    while len(out) < limit:
        now = time.monotonic()
        deadline = end if quiet_until is None else min(end, quiet_until)
        if now >= deadline:
            break
        ready, _, _ = select.select([fd], [], [], deadline - now)
        if not ready:
            break
        try:
            chunk = os.read(fd, min(65536, limit - len(out)))
        except BlockingIOError:
            continue
        except OSError:  # EIO: every holder of the terminal's other side is gone
            return bytes(out), False
        if not chunk:
            return bytes(out), False
        out += chunk
        quiet_until = time.monotonic() + quiet_s
    return bytes(out), True


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def main() -> None:
    # The protocol moves to private fds; 0/1 become /dev/null so nothing else can write frames.
    rfd, wfd = os.dup(0), os.dup(1)
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    inp, out = os.fdopen(rfd, "rb", buffering=1 << 16), os.fdopen(wfd, "wb", buffering=1 << 16)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    first = wire.recv(inp)
    if first is None:
        return
    try:
        sup = SupervisorServer(*first)
    except Exception as exc:
        wire.send(out, {"error": f"sandbox set-up failed: {exc}"})
        return
    wire.send(out, {"ok": True, "pid": os.getpid(), "overlay": sup.folders.overlay,
                    "spawner": sup.jail.spawner is not None})
    while (msg := wire.recv(inp)) is not None:
        try:
            meta, blob = sup.handle(*msg)
        except OSError as exc:
            meta, blob = {"error": exc.strerror or str(exc), "errno": exc.errno or 0}, b""
        except Exception as exc:
            meta, blob = {"error": f"{type(exc).__name__}: {exc}", "errno": 0}, b""
        wire.send(out, meta, blob)
    if sup.init["mode"] == "image":
        sup._kill_everything()
    else:
        proc.kill_leftovers(sup.jail)  # the host hung up: nothing of this sandbox may outlive it
    if sup.jail.spawner is not None:
        sup.jail.spawner.stop()
