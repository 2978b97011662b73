"""The host's handle on one running supervisor: launch (bwrap, Landlock or none), call, stop.

Launch order matters: the supervisor is moved into its cgroup before it is told to set up,
so that everything it ever starts inherits the cgroup.
"""

import contextlib
import json
import os
import queue
import select
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from temper.logs import log_tail
from temper.sandbox import bwrap, cgroups, direct, egress, egress_proxy, layout, seccomp, uids, volume
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import PathEscapeError, SandboxCrashed, SandboxError
from temper.sandbox.inside import wire

_ESCAPE_ERRNOS = {18, 40, 13, 1}  # EXDEV (left the root), ELOOP (symlink), EACCES, EPERM
_cg_cache: dict[bool, tuple[str | None, dict[str, Path]]] = {}


def host_cgroups(enabled: bool) -> tuple[str | None, dict[str, Path]]:
    if not enabled or os.geteuid() != 0:
        return None, {}
    if True not in _cg_cache:
        _cg_cache[True] = cgroups.detect()
    return _cg_cache[True]


_spawn_queue: "queue.SimpleQueue[tuple[list[str], dict[str, Any], Future]]" = queue.SimpleQueue()
_spawn_thread: threading.Thread | None = None
_spawn_lock = threading.Lock()


def _spawn(argv: list[str], **kw: Any) -> subprocess.Popen:
    """Popen from one thread that lives as long as the process: bwrap's --die-with-parent
    (PR_SET_PDEATHSIG) fires when the *thread* that started it ends, so a sandbox started from a
    short-lived thread (asyncio.to_thread, a worker pool) would die with that thread."""
    global _spawn_thread
    with _spawn_lock:
        if _spawn_thread is None or not _spawn_thread.is_alive():
            _spawn_thread = threading.Thread(target=_spawner, name="sandbox-spawner", daemon=True)
            _spawn_thread.start()
    fut: Future = Future()
    _spawn_queue.put((argv, kw, fut))
    return fut.result()


def _spawner() -> None:
    while True:
        argv, kw, fut = _spawn_queue.get()
        try:
            fut.set_result(subprocess.Popen(argv, **kw))
        except BaseException as exc:  # handed to the caller
            fut.set_exception(exc)


class SupervisorHandle:
    def __init__(self, cfg: SandboxConfig, mode: str, sandbox_id: str, template_key: str | None,
                 on_egress: Callable[[str, int, bool], None] | None = None):
        self.config, self.mode, self.id = cfg, mode, sandbox_id
        self._on_egress = on_egress  # image mode with an allowlist: each connection's (host, port, allowed)
        self._proc: subprocess.Popen | None = None
        self.cgroup: cgroups.Cgroup | None = None
        self.shielded = False  # its commands cannot signal the supervisor (bwrap's pid 1, Landlock scopes)
        self.broken_by_agent = False  # set when a call found the supervisor broken by the sandbox's contents
        self._lease: uids.UidLease | None = None
        self._folder: tuple[Path, bool] | None = None
        self._upper: Path | None = None  # image mode: the writable layer's folder (on its own filesystem)
        self._volume: volume.Volume | None = None
        # image mode with network egress: its slirp4netns, or its allowlisting proxy
        self._egress: subprocess.Popen | egress_proxy.EgressProxy | None = None
        self._stop_lock = threading.Lock()
        self._cancel_w = -1  # the write end of the supervisor's interrupt pipe
        self._seq = 0  # exec requests sent so far; `running`: the sequence number of the one in flight
        self.running: int | None = None
        t0 = time.monotonic()
        try:
            self._launch(template_key)
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0

    def _launch(self, key: str | None) -> None:
        cfg = self.config
        version, parents = host_cgroups(cfg.cgroups)
        bpf = b""
        block_w = -1
        if self.mode == "image":
            info_r, info_w = os.pipe()
            block_r, block_w = os.pipe()
            self._volume = volume.attach(layout.state_dir(cfg), self.id, cfg.limits.disk_mb << 20,
                                         cfg.image.uid_base)
            self._upper = self._volume.mount
            argv, plan = bwrap.plan_image(cfg, info_w, block_r, self._upper)
            bpf = seccomp.build_filter(False, image=True)
            argv, kw = bwrap.as_uid(cfg.image.uid_base, argv)
            pass_fds = (info_w, block_r)
        elif self.mode == "bwrap":
            info_r, info_w = os.pipe()
            self._lease = uids.lease_for(cfg, self.mode, self.id, layout.state_dir(cfg) / "templates")
            argv, plan = bwrap.plan(cfg, key, info_w, self._lease.view)
            bpf = seccomp.build_filter(False)
            argv, kw = bwrap.as_uid(self._lease.uid, argv)
            pass_fds = (info_w,)
        else:
            self._lease = uids.lease_for(cfg, self.mode, self.id, layout.state_dir(cfg) / "templates")
            self._folder = direct.prepare_folder(cfg, self.id, self._lease.uid)
            plan = direct.plan(cfg, self.mode, self._folder[0], key, self._lease.dedicated)
            argv = direct.argv(cfg)
            kw = {}
            if self.mode == "landlock":
                bpf = seccomp.build_filter(True)
                argv, kw = bwrap.as_uid(self._lease.uid, argv)
            pass_fds = ()
        cancel_r, self._cancel_w = os.pipe()
        os.set_blocking(self._cancel_w, False)  # an interrupt never waits
        pass_fds = (*pass_fds, cancel_r)
        plan.init["cancel_fd"] = cancel_r
        if "pids" in parents:  # let the pids cgroup, whose hits can be counted, stop a fork bomb first
            plan.init["rlimits"] = [(k, lo + 4, hi + 4) if k == "nproc" else (k, lo, hi)
                                    for k, lo, hi in plan.init["rlimits"]]
        self.plan = plan
        with open(self._log_path(), "wb") as log:  # the supervisor's own stderr (set-up failures)
            self._proc = _spawn(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, bufsize=0,
                                pass_fds=pass_fds, env={}, cwd="/", start_new_session=True, **kw)
        os.close(cancel_r)
        pid = self._proc.pid
        if self.mode in ("bwrap", "image"):
            os.close(info_w)
            pid = _read_info(info_r) or pid
        if self.mode == "image":
            os.close(block_r)
            try:  # root inside is uid_base outside, and so on for 65,536 ids; then bwrap goes on
                for name in ("uid_map", "gid_map"):
                    with open(f"/proc/{pid}/{name}", "w") as f:
                        f.write(f"0 {cfg.image.uid_base} 65536\n")
            except OSError as exc:
                raise SandboxError(f"sandbox {self.id}: cannot map the image's ids ({exc})") from None
            finally:
                os.write(block_w, b"1")
                os.close(block_w)
            if cfg.image.egress_proxy:
                self._egress = egress_proxy.EgressProxy(pid, cfg.image.egress_hosts, self.id, self._on_egress)
            elif cfg.image.network == "egress":
                self._egress = egress.start(pid, self.id)
        if version is not None:
            lim = cfg.limits
            disk_in_ram = 0 if self.mode == "image" else lim.disk_mb  # an image's writable layer is on disk
            self.cgroup = cgroups.Cgroup(version, parents, f"sb-{self.id}", (lim.memory_mb + disk_in_ram) << 20,
                                          lim.processes + 2, lim.cpus)
            with contextlib.suppress(ProcessLookupError):  # died at once: `call` reports why
                self.cgroup.add(pid)
        reply, _ = self.call({"op": "init", **plan.init}, bpf, timeout=30, init=True)
        self.overlay = bool(reply.get("overlay"))
        # pid 1 of a pid namespace, or (the spawner runs only where it is) outside the commands' Landlock domain
        self.shielded = self.mode in ("bwrap", "image") or bool(reply.get("spawner"))
        self.resident = 1 + bool(reply.get("spawner"))  # processes of an idle sandbox: supervisor (+ spawner)

    def _log_path(self) -> Path:
        d = layout.state_dir(self.config) / "logs"
        d.mkdir(exist_ok=True, mode=0o700)
        return d / f"{self.id}.log"

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        with self._stop_lock:  # a sandbox may be closed from two threads at once: release each part once
            proc, cgroup, lease, folder = self._proc, self.cgroup, self._lease, self._folder
            self._proc = self.cgroup = self._lease = self._folder = None
        cancel_w, self._cancel_w = self._cancel_w, -1
        if cancel_w >= 0:
            with contextlib.suppress(OSError):
                os.close(cancel_w)
        if proc is not None:
            for f in (proc.stdin, proc.stdout):
                with contextlib.suppress(OSError):
                    f.close()
            try:
                proc.wait(timeout=2)  # on EOF the supervisor kills what is left and exits
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9) if proc.pid > 0 else None
                proc.kill()
                proc.wait()
        if cgroup is not None:
            cgroup.remove()
        if lease is not None:
            if lease.dedicated and self.mode != "bwrap":  # bwrap: its pid namespace died with it
                direct.kill_uid(lease.uid)
            lease.release()
        if folder is not None:
            direct.remove_folder(*folder)
        out, self._egress = self._egress, None
        if isinstance(out, egress_proxy.EgressProxy):
            out.stop()
        elif out is not None:
            egress.stop(out)
        vol, self._volume = self._volume, None
        if vol is not None:
            volume.detach(vol)
        with contextlib.suppress(OSError):
            self._log_path().unlink()

    def interrupt(self) -> bool:
        """Kill the command running now, if any, from any thread (the caller of `exec` holds the sandbox's
        lock): it returns at once with limit "interrupted". Stale interrupts are ignored by number."""
        seq, fd = self.running, self._cancel_w
        if seq is None or fd < 0:
            return False
        try:
            os.write(fd, seq.to_bytes(4, "little"))
        except OSError:  # closed meanwhile, or a pipe full of interrupts: the command ends anyway
            return False
        return True

    # -- protocol ------------------------------------------------------------------------------
    def call(self, meta: dict[str, Any], blob: bytes = b"", timeout: float = 30.0,
              init: bool = False) -> tuple[dict[str, Any], bytes]:
        proc = self._proc
        if proc is None or (not init and proc.poll() is not None):
            # died between calls (nothing of the sandbox runs then): from outside, unless a call saw it break
            raise SandboxCrashed(f"sandbox {self.id}: not running (closed, or its supervisor died); reset() restarts",
                                 by_agent=self.broken_by_agent)
        refused = timed_out = False
        if meta["op"] == "exec":
            self._seq += 1
            meta = {**meta, "seq": self._seq}
            self.running = self._seq
        try:
            wire.send(proc.stdin, meta, blob)
            ready, _, _ = select.select([proc.stdout], [], [], timeout)
            timed_out = not ready
            msg = None if timed_out else wire.recv(proc.stdout)
        except ValueError:  # a frame the protocol forbids (e.g. an oversized header)
            msg, refused = None, True
        except (BrokenPipeError, OSError):
            msg = None
        finally:
            self.running = None
        if msg is None:
            if not (refused or timed_out):  # its pipe closed: it is exiting, but is reaped a moment after
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=2)
            silent = proc.poll() is None
            why = "sent a reply it may not" if refused else "did not answer in time" if silent else "exited"
            self.broken_by_agent = not init and self._broken_by_contents(meta["op"], refused or silent)
            detail = self._log_tail()
            self.stop()
            raise SandboxCrashed(f"sandbox {self.id}: supervisor {why}" + (f": {detail}" if detail else "")
                                 + (" (caused inside the sandbox)" if self.broken_by_agent else ""),
                                 by_agent=self.broken_by_agent)
        reply, data = msg
        if "error" in reply:
            if init:
                self.stop()
                raise SandboxError(f"sandbox {self.id}: {reply['error']}")
            path = meta.get("path") or meta.get("dest") or ""
            code = int(reply.get("errno") or 0)
            if code in _ESCAPE_ERRNOS:
                raise PathEscapeError(f"{path}: refused, outside the sandbox's folders ({reply['error']})", code)
            raise SandboxError(f"{path or meta['op']}: {reply['error']}", code)
        return reply, data

    def _broken_by_contents(self, op: str, stuck: bool) -> bool:
        """Whether what the sandbox runs or holds broke its supervisor during this call (see
        SandboxCrashed). Host-side files and requests are trusted; the sandbox's are not: a supervisor
        that is stuck or sent a forbidden reply was made so by them, one OOM-killed in the sandbox's
        own cgroup by what is charged there, and where commands share its uid unshielded they can kill it."""
        if stuck:
            return True
        if self.cgroup is not None and self.cgroup.new_hits()[0]:
            return True
        return op == "exec" and not self.shielded

    def _log_tail(self) -> str:
        return (log_tail(self._log_path(), 1) or [""])[-1]


def _read_info(fd: int) -> int | None:
    """bwrap's --info-fd JSON: the host pid of the sandbox's pid 1 (our supervisor, --as-pid-1)."""
    data = b""
    try:
        while b"}" not in data:
            ready, _, _ = select.select([fd], [], [], 10)
            chunk = os.read(fd, 4096) if ready else b""
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError):
        return None
