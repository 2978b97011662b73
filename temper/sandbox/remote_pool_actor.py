"""The body of a sandbox pool Ray actor: a `SandboxPool` on the actor's node, with its sandboxes held
by id for clients elsewhere in the cluster (remote_pool.py is the client side).

Everything a sandbox does happens here: its supervisor, its workspace, and its audit log, which is
written under the run folder's `nodes/<node id>/` on this node. Template and upload folders
arrive by content (a tar, once per content signature), so the client's paths need not exist here.
"""

import io
import os
import shutil
import tarfile
import threading
from pathlib import Path
from typing import Any

from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import SandboxError
from temper.sandbox.pool import SandboxPool
from temper.sandbox.sandbox import KEEP, Sandbox

KEEP_TOKEN = ("temper-keep-template",)  # KEEP does not survive pickling: it travels as this
CALLS = frozenset({"exec", "interrupt", "write_file", "read_file", "list_files", "upload", "reset", "close"})


def node_audit_dir(run_dir: Path, node_id: str) -> Path:
    """Where a pool actor on `node_id` writes its audit log (under the run folder, on that node)."""
    return Path(run_dir) / "nodes" / node_id[:12]


class SandboxPoolActor:
    def __init__(self, config: SandboxConfig, pool_size: int):
        import ray

        self.node_id = ray.get_runtime_context().get_node_id()
        cfg = config.model_copy(update={"run_dir": node_audit_dir(config.run_dir, self.node_id),
                                        "pool_size": pool_size})
        self.pool = SandboxPool(cfg)
        self.folders = cfg.state_dir / "remote-folders"
        self.held: dict[str, Sandbox] = {}
        self.lock = threading.Lock()

    def where(self) -> dict[str, Any]:
        """This actor's node, process and audit log (for logs and tests)."""
        return {"node_id": self.node_id, "pid": os.getpid(), "audit": str(self.pool.config.audit_path)}

    def acquire(self, template: Any) -> tuple[str, str]:
        """A sandbox on `template` (a folder key from put_folder, None, or KEEP_TOKEN): (id, workdir)."""
        sb = self.pool.acquire(self._template(template))
        with self.lock:
            self.held[sb.id] = sb
        return sb.id, sb.workdir

    def release(self, sandbox_id: str) -> None:
        with self.lock:
            sb = self.held.pop(sandbox_id, None)
        if sb is not None:
            self.pool.release(sb)

    def call(self, sandbox_id: str, op: str, *args: Any, **kwargs: Any) -> Any:
        """One sandbox request (`op` is a Sandbox method); folders in upload/reset come as keys."""
        if op not in CALLS:
            raise SandboxError(f"remote sandbox: {op!r} is not a sandbox call")
        with self.lock:
            sb = self.held.get(sandbox_id)
        if sb is None:
            raise SandboxError(f"remote sandbox {sandbox_id}: not held (released, or its pool restarted)")
        if op == "upload":
            args = (self._folder(args[0]), *args[1:])
        elif op == "reset":
            args = tuple(self._template(a) for a in args)
        return getattr(sb, op)(*args, **kwargs)

    def has_folder(self, key: str) -> bool:
        return (self.folders / key).is_dir()

    def put_folder(self, key: str, tar: bytes) -> None:
        """Unpack a folder's tar under its content key (idempotent; a half-written one never shows)."""
        dest = self.folders / key
        if dest.is_dir():
            return
        tmp = self.folders / f".{key}.{threading.get_ident()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
            tf.extractall(tmp, filter="tar")  # the tar filter refuses absolute paths and links out of tmp
        try:
            os.rename(tmp, dest)
        except OSError:  # another call unpacked it first
            shutil.rmtree(tmp, ignore_errors=True)

    def close(self) -> None:
        with self.lock:
            held, self.held = list(self.held.values()), {}
        for sb in held:
            sb.close()
        self.pool.close()

    def _template(self, template: Any) -> Any:
        if template == KEEP_TOKEN:
            return KEEP
        return None if template is None else self._folder(template)

    def _folder(self, key: str) -> Path:
        path = self.folders / key
        if not path.is_dir():
            raise SandboxError(f"remote sandbox pool: folder {key} was never sent to this node")
        return path
