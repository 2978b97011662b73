"""Landlock and `none` launch: no namespaces, for hosts that refuse them (e.g. default Docker).

The supervisor runs directly as a uid of its own; each command is further confined by
rlimits, Landlock (filesystem: system folders read-only, its own folder writable; all TCP;
signals and abstract sockets outside the sandbox) and seccomp. Without a mount namespace the
workspace stays at its host path (`Sandbox.workdir`), and /tmp is the sandbox's own tmp
folder (TMPDIR). When we are root, the sandbox folder is a tmpfs of `disk_mb`.
"""

import contextlib
import os
import shutil
from pathlib import Path

from temper import firsttime
from temper.sandbox import layout
from temper.sandbox.config import SandboxConfig
from temper.sandbox.inside import native
from temper.sandbox.layout import INSIDE_DIR, Plan

DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full")
DEVICES_RO = ("/dev/urandom", "/dev/random")


def prepare_folder(cfg: SandboxConfig, sandbox_id: str, uid: int) -> tuple[Path, bool]:
    """The sandbox's own folder, owned by its uid; a sized tmpfs when we may mount (root)."""
    folder = layout.state_dir(cfg) / "sb" / sandbox_id
    firsttime.write_owner(folder)  # first: a folder whose owner is gone is a crashed run's (leftovers.py)
    folder.mkdir(parents=True, exist_ok=True)
    (folder.parent).chmod(0o711)
    mounted = False
    if os.geteuid() == 0:
        try:
            native.mount("tmpfs", str(folder), "tmpfs", native.MS_NOSUID | native.MS_NODEV,
                         f"size={cfg.limits.disk_mb << 20},mode=0700,uid={uid},gid={uid}")
            mounted = True
        except OSError:
            pass
    if os.geteuid() == 0:
        os.chown(folder, uid, uid)
    folder.chmod(0o700)
    return folder, mounted


def remove_folder(folder: Path, mounted: bool) -> None:
    if mounted:
        with contextlib.suppress(OSError):
            native.umount(str(folder))
    shutil.rmtree(folder, ignore_errors=True)
    firsttime.drop_owner(folder)


def plan(cfg: SandboxConfig, mode: str, folder: Path, template_key: str | None, dedicated_uid: bool) -> Plan:
    state = layout.state_dir(cfg)
    troot = str(state / "templates")
    ws = str(folder / "ws")
    tmp = str(folder / "tmp")
    views = [{"name": "ws", "dest": ws, "lower": f"{troot}/{template_key}" if template_key else None}]
    dest_map: dict[str, str] = {}
    readable = []
    for i, m in enumerate(cfg.mounts):
        if m.src is not None and not m.writable:
            dest_map[m.dest] = str(m.src.resolve())
            readable.append(dest_map[m.dest])
            continue
        dest_map[m.dest] = str(folder / f"m{i}")
        views.append({"name": f"m{i}", "dest": dest_map[m.dest], "lower": str(m.src.resolve()) if m.src else None})
    init = layout.common_init(cfg, mode, "uid" if dedicated_uid else "tree")
    if mode == "landlock":  # POSIX queues live in the host's IPC namespace, where a reset cannot list them
        init["rlimits"].append(("msgqueue", 0, 0))
    py = layout.python_env(cfg)
    read = [*layout.SYSTEM_DIRS, *(f"/etc/{n}" for n in layout.ETC_FILES), *DEVICES_RO, *readable]
    if py is not None:
        read.append(str(py))
    init.update(
        template_root=troot,
        folders={"mode": "copy", "rw_root": str(folder), "disk_bytes": cfg.limits.disk_mb << 20, "views": views,
                 "tmp": tmp, "readable": readable},
        env=layout.base_env(cfg, ws, tmp),
        landlock={"read": read, "write": [str(folder), *DEVICES_RW]} if mode == "landlock" else None,
    )
    return Plan(mode, ws, dest_map, init)


def argv(cfg: SandboxConfig) -> list[str]:
    return [str(cfg.supervisor_python), "-S", "-B", str(INSIDE_DIR / "supervisor.py")]


def kill_uid(uid: int) -> None:
    """Kill every process of `uid` (a dedicated sandbox uid; we are root)."""
    if uid < 1000:
        raise ValueError(f"refusing to kill the processes of system uid {uid}")
    for _ in range(50):
        found = False
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                st = os.stat(f"/proc/{name}")
            except OSError:
                continue
            if st.st_uid == uid:
                found = True
                with contextlib.suppress(OSError):
                    os.kill(int(name), 9)
        if not found:
            return
