"""Per-sandbox cgroups for memory, pids and CPU: v2 where delegated, v1 otherwise.

Each sandbox gets `<our own cgroup>/temper/<id>` (so limits nest under whatever limits us),
the supervisor is moved in before it runs anything, and every process a command starts
inherits it. OOM kills and pids-limit hits are read back to say which limit was hit.
"""

import contextlib
import os
import signal
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids", "cpu")


def _own_path(controller: str | None) -> str:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if (controller is None and ctrls == "") or (controller and controller in ctrls.split(",")):
            return path
    return "/"


def detect() -> tuple[str | None, dict[str, Path]]:
    """("v2"|"v1"|None, controller -> parent folder for sandboxes) for the controllers we can use."""
    if (ROOT / "cgroup.controllers").is_file():  # unified hierarchy mounted at the root
        base = ROOT / _own_path(None).lstrip("/")
        enabled = (base / "cgroup.controllers").read_text().split() if (base / "cgroup.controllers").exists() else []
        parent = base / "temper"
        try:
            parent.mkdir(exist_ok=True)
            wanted = [c for c in CONTROLLERS if c in enabled]
            (parent / "cgroup.subtree_control").write_text(" ".join("+" + c for c in wanted))
        except OSError:
            return None, {}
        return "v2", {c: parent for c in wanted}
    found: dict[str, Path] = {}
    for c in CONTROLLERS:
        d = ROOT / c
        if not (d / "cgroup.procs").is_file():
            continue
        parent = d / _own_path(c).lstrip("/") / "temper"
        try:
            parent.mkdir(exist_ok=True)
            found[c] = parent
        except OSError:
            continue
    return ("v1" if found else None), found


class Cgroup:
    """One sandbox's cgroup(s); memory is the command's memory plus its tmpfs (charged there too)."""

    def __init__(self, version: str, parents: dict[str, Path], name: str, memory: int, pids: int, cpus: float):
        self.version = version
        self.dirs: dict[str, Path] = {}
        for c, parent in parents.items():
            d = parent / name
            if d in self.dirs.values():
                continue
            d.mkdir(exist_ok=True)
            self.dirs[c] = d
        self._set("memory", "memory.max" if version == "v2" else "memory.limit_in_bytes", str(memory))
        self._set("pids", "pids.max", str(pids))
        period = 100_000
        if version == "v2":
            self._set("cpu", "cpu.max", f"{int(cpus * period)} {period}")
        else:
            self._set("cpu", "cpu.cfs_period_us", str(period))
            self._set("cpu", "cpu.cfs_quota_us", str(int(cpus * period)))
        self._oom0, self._pids0 = self.oom_kills(), self.pids_hits()

    @property
    def controllers(self) -> list[str]:
        return [c for c in CONTROLLERS if c in self.dirs]

    def _set(self, controller: str, file: str, value: str) -> None:
        if controller in self.dirs:
            (self.dirs[controller] / file).write_text(value)

    def _counter(self, controller: str, file: str, key: str) -> int:
        if controller not in self.dirs:
            return 0
        try:
            for line in (self.dirs[controller] / file).read_text().splitlines():
                k, _, v = line.partition(" ")
                if k == key:
                    return int(v)
        except (OSError, ValueError):
            pass
        return 0

    def oom_kills(self) -> int:
        return self._counter("memory", "memory.events" if self.version == "v2" else "memory.oom_control", "oom_kill")

    def pids_hits(self) -> int:
        return self._counter("pids", "pids.events", "max")

    def new_hits(self) -> tuple[bool, bool]:
        """(OOM kill, pids limit hit) since the last call."""
        oom, pids = self.oom_kills(), self.pids_hits()
        hit = (oom > self._oom0, pids > self._pids0)
        self._oom0, self._pids0 = oom, pids
        return hit

    def add(self, pid: int) -> None:
        for d in set(self.dirs.values()):
            (d / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        for d in set(self.dirs.values()):
            for _ in range(200):
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    d.rmdir()
                    break
                except OSError:
                    time.sleep(0.005)
