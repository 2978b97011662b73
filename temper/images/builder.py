"""The OCI build tool temper drives: docker where its daemon answers, else podman (no daemon; it builds with
`--isolation chroot`, since crun refuses hybrid cgroup hosts and no container runtime is needed to build).

podman keeps its own storage under the image store (`podman/`), apart from the user's images.
"""

import collections
import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from temper.errors import TemperError
from temper.images.config import ImagesConfig
from temper.images.dockerfile import Instruction, step_line

TAIL_LINES = 8
PODMAN_RUNROOT_MAX = 50
_PODMAN_STEP = re.compile(r"^STEP (\d+)/(\d+): ")
_DOCKER_STEP = re.compile(r"^#\d+ \[(?:[\w.-]+ )?(\d+)/(\d+)\] ")


class ImageBuildError(TemperError):
    pass


@dataclass
class Tool:
    name: str  # podman | docker
    argv0: list[str]  # the executable and its global flags
    timings: dict[str, float] = field(default_factory=dict)

    def run(self, *args: str, timeout: float = 600.0, what: str = "") -> str:
        try:
            r = subprocess.run([*self.argv0, *args], capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ImageBuildError(f"{what or self.name + ' ' + args[0]}: ran past {timeout:.0f} s") from None
        if r.returncode != 0:
            tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-TAIL_LINES:])
            raise ImageBuildError(f"{what or self.name + ' ' + args[0]}: exit {r.returncode}: {tail}")
        return r.stdout

    def has_image(self, ref: str) -> bool:
        return subprocess.run([*self.argv0, "image", "inspect", ref], capture_output=True).returncode == 0

    def import_rootfs(self, tarball: Path, ref: str, env: dict[str, str]) -> None:
        changes = [a for k, v in env.items() for a in ("--change", f"ENV {k}={v}")]
        self.run("import", *changes, "--change", 'CMD ["bash"]', str(tarball), ref, what=f"importing {ref}")

    def save(self, ref: str, dest: Path) -> None:
        """`ref` written to folder `dest` as an OCI layout (podman) or an unpacked Docker archive (docker)."""
        if self.name == "podman":
            self.run("save", "--format", "oci-dir", "-o", str(dest), ref, timeout=1800, what=f"saving {ref}")
            return
        archive = dest.with_suffix(".tar")
        self.run("save", "-o", str(archive), ref, timeout=1800, what=f"saving {ref}")
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(dest, filter="data")
        finally:
            archive.unlink(missing_ok=True)

    def build(self, dockerfile: Path, context: Path, ref: str, instructions: list[Instruction], where: str,
              timeout_s: float, on_line: Callable[[str], None] | None = None) -> None:
        """Build; a failure raises one error naming `where`, the Dockerfile line and the output's last lines."""
        args = ["build", "-f", str(dockerfile), "-t", ref]
        if self.name == "podman":
            args += ["--isolation", "chroot", "--pull=missing", "--layers"]
        else:
            args += ["--progress", "plain"]
        proc = subprocess.Popen([*self.argv0, *args, str(context)], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, errors="replace")
        tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        step, deadline, t0 = 0, time.monotonic() + timeout_s, time.monotonic()
        assert proc.stdout is not None
        try:
            for raw in proc.stdout:
                line = raw.rstrip()
                m = (_PODMAN_STEP if self.name == "podman" else _DOCKER_STEP).match(line)
                if m:
                    step = int(m.group(1))
                if line:
                    tail.append(line)
                    if on_line:
                        on_line(line)
                if time.monotonic() > deadline:
                    proc.kill()
                    break
            rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
        finally:
            proc.stdout.close()
        self.timings["build_s"] = time.monotonic() - t0
        if rc == 0 and time.monotonic() <= deadline:
            return
        ins = step_line(instructions, step) if step else None
        at = f"{dockerfile.name} line {ins.line} ({ins.text.strip()[:80]})" if ins else dockerfile.name
        why = f"ran past {timeout_s:.0f} s" if time.monotonic() > deadline else f"exit {rc}"
        raise ImageBuildError(f"{where}: building {at} failed ({why}): " + " | ".join(tail))


def docker_daemon() -> bool:
    exe = shutil.which("docker")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "info"], capture_output=True, timeout=10).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def choose(cfg: ImagesConfig) -> Tool:
    if cfg.builder in ("auto", "docker") and docker_daemon():
        return Tool("docker", [shutil.which("docker") or "docker"])
    if cfg.builder == "docker":
        raise ImageBuildError("images.builder: docker, but no Docker daemon answers here (docker info fails)")
    exe = shutil.which("podman")
    if exe is None:
        raise ImageBuildError("no image build tool: podman is not installed and no Docker daemon answers "
                              "(apt-get install podman, or bash scripts/setup.sh --with-images)")
    root = cfg.store / "podman"
    return Tool("podman", [exe, "--root", str(root / "storage"), "--runroot", str(_runroot(root)),
                           "--cgroup-manager", "cgroupfs", "--events-backend", "file"])


def _runroot(root: Path) -> Path:
    """podman's transient state (locks, pids): beside its storage, unless that path is longer than the 50
    characters podman accepts (its sockets' paths must fit); then a short folder named after the store."""
    run = root / "run"
    if len(str(run)) <= PODMAN_RUNROOT_MAX:
        return run
    tmp = Path("/run") if os.access("/run", os.W_OK) else Path(tempfile.gettempdir())
    return tmp / f"temper-podman-{hashlib.sha256(str(root).encode()).hexdigest()[:12]}"
