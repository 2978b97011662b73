"""A sandbox: isolated command execution and confined file access over one workspace.

    with Sandbox(SandboxConfig(workspace=Path("task"))) as sb:
        r = sb.exec("python3 -c 'print(1+1)'")      # ExecResult(exit_code=0, stdout=b"2\\n", ...)
        sb.write_file("notes.txt", "hi")            # relative paths are in the workspace
        sb.reset()                                  # back to the template (overlay: ~1 ms)

Every request is appended to the hash-chained audit log. One request at a time per sandbox
(a lock serialises threads); use many sandboxes, or a SandboxPool, for concurrency.
"""

import contextlib
import threading
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from temper.sandbox import layout, modes, stage
from temper.sandbox.audit import AuditLog, sha256
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import PathEscapeError, SandboxCrashed
from temper.sandbox.host import SupervisorHandle
from temper.sandbox.result import ExecResult, FileEntry, FileList, ShellOutput

SHELL = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
AUDIT_TEXT = 4096  # an audit record keeps the head of typed keys and of stdin as text (what a command ran)
KEEP: Any = object()  # reset(template=KEEP): keep the current template


class Sandbox:
    def __init__(self, config: SandboxConfig | None = None, *, template: Path | str | None = KEEP,
                 audit: AuditLog | None = None):
        self.config = config or SandboxConfig()
        self.id = uuid.uuid4().hex[:12]
        self.mode = modes.resolve(self.config)
        self.audit = audit if audit is not None else (
            AuditLog.shared(self.config.audit_path) if self.config.audit else None)
        tpl = self.config.workspace if template is KEEP else template
        self.template: Path | None = Path(tpl) if tpl is not None else None
        self._lock = threading.RLock()
        self._shell = SHELL if self.config.image is None else image_shell(self.config.image.layers)
        self.warm = False  # set by a pool when it served this sandbox already started
        self._sup: SupervisorHandle | None = None
        self._start()

    def _start(self) -> None:
        key = self._stage(self.template)
        self._sup = SupervisorHandle(self.config, self.mode, self.id, key, on_egress=self._audit_egress)
        self.template_key = key
        image = self.config.image
        self._audit("create", mode=self.mode, template=str(self.template) if self.template else None,
                    template_key=key, limits=self.config.limits.model_dump(), cgroups=self.cgroup_controllers,
                    start_ms=round(self._sup.started_s * 1e3, 2),
                    **({"image_layers": [p.name for p in image.layers], "image_user": image.user} if image else {}))

    def _stage(self, template: Path | None) -> str | None:
        if template is None:
            return None
        return stage.stage(template, layout.state_dir(self.config) / "templates", self.config.uid)

    # -- properties ---------------------------------------------------------------------------
    @property
    def workdir(self) -> str:
        """The workspace as commands see it: `workspace_mount` with bwrap, a host path with Landlock."""
        return self._live().plan.workdir

    @property
    def overlay(self) -> bool:
        """True when resets are kernel overlays (else the template is copied)."""
        return bool(self._sup and self._sup.overlay)

    @property
    def alive(self) -> bool:
        return self._sup is not None and self._sup.alive

    @property
    def cgroup_controllers(self) -> list[str]:
        return self._sup.cgroup.controllers if self._sup and self._sup.cgroup else []

    @property
    def started_s(self) -> float:
        return self._sup.started_s if self._sup else 0.0

    def path(self, path: str) -> str:
        """Where `path` (relative to the workspace, or under a configured mount) is for commands."""
        p = PurePosixPath(path)
        if ".." in p.parts:
            raise PathEscapeError(f"{path}: '..' is not allowed in sandbox paths")
        if not p.is_absolute():
            return str(PurePosixPath(self.workdir) / p)
        for dest, real in sorted(self._live().plan.dest_map.items(), key=lambda kv: -len(kv[0])):
            if p == PurePosixPath(dest) or PurePosixPath(dest) in p.parents:
                return str(PurePosixPath(real) / p.relative_to(dest))
        mount = PurePosixPath(self.config.workspace_mount)
        if str(mount) != self.workdir and (p == mount or mount in p.parents):
            return str(PurePosixPath(self.workdir) / p.relative_to(mount))
        return str(p)

    # -- requests -----------------------------------------------------------------------------
    def exec(self, cmd: str | Sequence[str], *, stdin: bytes | str | None = None, timeout: float | None = None,
             env: Mapping[str, str] | None = None, cwd: str | None = None, user: str | None = None) -> ExecResult:
        """Run `cmd` (a string runs under bash -c; a list is an argv) and wait for it. `user`: an image
        sandbox's user for this command (name, uid, `name:group`); default the image's USER."""
        image = self.config.image
        argv = [self._shell, "-c", cmd] if isinstance(cmd, str) else [str(a) for a in cmd]
        data = stdin.encode() if isinstance(stdin, str) else stdin
        wall = float(timeout if timeout is not None else self.config.limits.wall_time_s)
        with self._lock:
            sup = self._live()
            req = {"op": "exec", "argv": argv, "env": {**sup.plan.init["env"], **(env or {})},
                   "cwd": self.path(cwd) if cwd else sup.plan.workdir, "timeout": wall, "stdin": data is not None}
            if image is not None:
                req["user"] = user if user is not None else image.user
            meta, blob = sup.call(req, data or b"", timeout=wall + 15)
            oom, pids_hit = sup.cgroup.new_hits() if sup.cgroup else (False, False)
        limit = meta["limit"]
        if oom and limit != "wall_time":
            limit = "memory"
        elif pids_hit and limit in (None, "wall_time"):
            limit = "processes"
        n = meta["stdout_len"]
        r = ExecResult(meta["exit_code"], blob[:n], blob[n:], meta["duration_s"], limit,
                       meta["stdout_truncated"], meta["stderr_truncated"], meta["cpu_s"], meta.get("maxrss_kb") or 0)
        self._audit("exec", argv=argv, cwd=req["cwd"], env=dict(env or {}), stdin_bytes=len(data or b""),
                    stdin_sha256=sha256(data) if data else None,
                    stdin_head=data[:AUDIT_TEXT].decode(errors="replace") if data else None,
                    timeout_s=wall, limits=self.config.limits.model_dump(),
                    exit_code=r.exit_code, duration_s=round(r.duration_s, 6), cpu_s=round(r.cpu_s, 4), limit=limit,
                    stdout_bytes=len(r.stdout), stdout_sha256=sha256(r.stdout), stderr_bytes=len(r.stderr),
                    stderr_sha256=sha256(r.stderr), truncated=r.stdout_truncated or r.stderr_truncated)
        return r

    def shell(self, keys: str = "", *, wait_s: float = 2.0, quiet_s: float = 0.3, max_bytes: int = 64 << 10,
              user: str | None = None) -> ShellOutput:
        """Type `keys` into the sandbox's one interactive shell (started on first use, on a terminal of its own;
        "\n" presses Enter, "\x03" is Ctrl-C) and return what it printed since the last call, once quiet for
        `quiet_s` or after `wait_s`. Its working folder, variables and background jobs persist between calls
        until a reset. bwrap and image sandboxes only."""
        with self._lock:
            sup = self._live()
            bash = self._shell.endswith("bash")
            req: dict[str, Any] = {
                "op": "shell", "keys": keys, "wait_s": wait_s, "quiet_s": quiet_s, "max_bytes": max_bytes,
                "argv": [self._shell, "--noprofile", "--norc", "-i"] if bash else [self._shell, "-i"],
                "env": {**sup.plan.init["env"], "TERM": "dumb", "PS1": "$ "}, "cwd": sup.plan.workdir}
            if self.config.image is not None:
                req["user"] = user if user is not None else self.config.image.user
            meta, raw = sup.call(req, timeout=wait_s + 15)
        out = ShellOutput(raw, bool(meta["started"]), bool(meta["alive"]))
        self._audit("shell", keys=keys[:AUDIT_TEXT], keys_bytes=len(keys), keys_sha256=sha256(keys.encode()),
                    output_bytes=len(raw),
                    output_sha256=sha256(raw), started=out.started, alive=out.alive)
        return out

    def interrupt(self) -> bool:
        """Kill the command `exec` is running now, from another thread (it returns with limit "interrupted");
        False if none was running. For a caller that has gone, e.g. an agent program that exited mid-call."""
        sup = self._sup
        done = sup is not None and sup.interrupt()
        if done:
            self._audit("interrupt")
        return done

    def write_file(self, path: str, data: bytes | str, mode: int = 0o644) -> None:
        """Write a file in the workspace (or a writable mount); parents are created. Symlinks are
        refused (PathEscapeError), and so is anything but a regular file at `path` (a fifo, a socket)."""
        raw = data.encode() if isinstance(data, str) else bytes(data)
        with self._lock:
            target = self.path(path)
            self._audit("write_file", path=target, bytes=len(raw), sha256=sha256(raw), mode=oct(mode))
            self._live().call({"op": "write", "path": target, "mode": mode}, raw)

    def read_file(self, path: str, max_bytes: int = 64 << 20) -> bytes:
        """A regular file's bytes (a fifo, socket or folder at `path` is a SandboxError, at once)."""
        with self._lock:
            target = self.path(path)
            try:
                _, data = self._live().call({"op": "read", "path": target, "limit": max_bytes})
            except Exception as exc:
                self._audit("read_file", path=target, error=str(exc))
                raise
            self._audit("read_file", path=target, bytes=len(data), sha256=sha256(data))
            return data

    def list_files(self, path: str = ".", recursive: bool = False) -> FileList:
        """The entries under `path`; a folder too large for one reply is cut (`.truncated` is True)."""
        with self._lock:
            target = self.path(path)
            meta, _ = self._live().call({"op": "list", "path": target, "recursive": recursive})
            truncated = bool(meta.get("truncated"))
            self._audit("list_files", path=target, recursive=recursive, entries=len(meta["entries"]),
                        truncated=truncated)
            return FileList([FileEntry(**e) for e in meta["entries"]], truncated)

    def upload(self, src_dir: Path | str, dest: str, read_only: bool = False) -> None:
        """Copy a host folder into a writable folder of the sandbox (e.g. tests for a verifier phase).
        Nothing the sandbox planted is followed: a symlink at `dest` or inside it is refused
        (PathEscapeError), as is a fifo or socket where a file goes (SandboxError). read_only: `dest` is one
        of the config's mounts; what is in it goes first, and it stays read-only for every command until the
        next reset or upload there (a read-only remount in bwrap mode; mode bits only in Landlock mode)."""
        with self._lock:
            key = self._stage(Path(src_dir))
            target = self.path(dest)
            self._audit("upload", src=str(src_dir), dest=target, template_key=key, read_only=read_only)
            self._live().call({"op": "copy_in", "key": key, "dest": target, "read_only": read_only})

    def reset(self, template: Path | str | None = KEEP) -> float:
        """Back to the template (another one if given): kills every process, restores every writable
        folder and /tmp. Restarts the sandbox if it had died. Returns the seconds it took."""
        with self._lock:
            sup = self._live()
            req: dict[str, Any] = {"op": "reset"}
            if template is not KEEP:
                new = Path(template) if template is not None else None
                key = self._stage(new)  # first: a template that cannot be staged changes nothing
                self.template, self.template_key = new, key
                req["template"] = f"{req_root(self)}/{key}" if key else None
            if not sup.alive:
                sup.stop()
                self._start()
                self._audit("reset", restarted=True, template_key=self.template_key)
                return self._sup.started_s if self._sup else 0.0
            meta, _ = self._sup.call(req)
            self._audit("reset", template_key=self.template_key, reset_ms=round(meta["reset_s"] * 1e3, 3))
            return float(meta["reset_s"])

    def close(self) -> None:
        with self._lock:
            if self._sup is None:
                return
            self._audit("close")
            sup, self._sup = self._sup, None
            sup.stop()

    def _live(self) -> SupervisorHandle:
        if self._sup is None:
            raise SandboxCrashed(f"sandbox {self.id}: closed")
        return self._sup

    def _audit_egress(self, host: str, port: int, allowed: bool) -> None:
        self._audit("egress", host=host, port=port, allowed=allowed)

    def _audit(self, op: str, **fields: Any) -> None:
        if self.audit is not None:
            self.audit.append(self.id, op, **fields)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten sandbox must not leave its mounts and cgroups behind
        if getattr(self, "_sup", None) is not None:
            with contextlib.suppress(Exception):
                self.close()


def image_shell(layers: Sequence[Path]) -> str:
    """bash where the image has it (what agents write), else its /bin/sh."""
    has_bash = any((layer / d / "bash").exists() for layer in layers for d in ("usr/bin", "bin"))
    return "/bin/bash" if has_bash else "/bin/sh"


def req_root(sb: Sandbox) -> str:
    """The staged-templates folder as the supervisor sees it."""
    return str(sb._live().plan.init["template_root"])
