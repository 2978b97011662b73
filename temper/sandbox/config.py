"""Configuration of a sandbox: isolation mode, resource limits, mounts, pool size, uid.

Every field has a default that runs on a plain Linux machine; `temper sandbox check`
reports what the host actually enforces.
"""

import tempfile
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field, field_validator, model_validator

from temper.config import ConfigModel

Isolation = Literal["auto", "bwrap", "landlock", "none"]

# Paths the sandbox itself owns; a mount on them would break it.
RESERVED = ("/", "/usr", "/proc", "/dev", "/etc", "/.temper", "/bin", "/lib", "/lib64", "/sbin")


class Limits(ConfigModel):
    """Per-command limits (rlimits always; cgroups for memory/pids/CPU where the host offers them)."""

    wall_time_s: float = Field(30.0, gt=0, description="Wall-clock time per exec.")
    cpu_time_s: int = Field(60, gt=0, description="CPU seconds per exec (RLIMIT_CPU).")
    memory_mb: int = Field(1024, ge=64, description="Memory: cgroup limit for the sandbox and RLIMIT_AS.")
    address_space_mb: int | None = Field(
        None, ge=0, description="RLIMIT_AS; None = memory_mb, 0 = unlimited (Go/JVM reserve a lot)."
    )
    processes: int = Field(128, ge=2, description="Processes and threads (RLIMIT_NPROC, pids cgroup).")
    file_size_mb: int = Field(256, ge=1, description="Largest file a command may write (RLIMIT_FSIZE).")
    open_files: int = Field(256, ge=16, description="Open file descriptors (RLIMIT_NOFILE).")
    output_bytes: int = Field(1 << 20, ge=1024, description="Cap per stream; beyond it output is cut.")
    disk_mb: int = Field(512, ge=1, description="Writable space: workspace changes, /tmp, scratch mounts.")
    cpus: float = Field(1.0, gt=0, description="CPU bandwidth (cgroup cpu quota), in cores.")

    @property
    def rlimit_as_bytes(self) -> int | None:
        mb = self.memory_mb if self.address_space_mb is None else self.address_space_mb
        return None if mb == 0 else mb << 20


class Mount(ConfigModel):
    """A folder inside the sandbox. `src` None: an empty writable scratch folder (reset with the
    workspace); `src` with writable=False: a read-only bind; writable=True: an overlay on `src`."""

    dest: str
    src: Path | None = None
    writable: bool = False
    size_mb: int | None = Field(None, ge=1, description="A scratch folder on a filesystem of its own of this size, "
                                "apart from disk_mb (bwrap mode; Landlock mode shares the sandbox's folder).")

    @field_validator("dest")
    @classmethod
    def _absolute(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not p.is_absolute() or ".." in p.parts:
            raise ValueError("must be an absolute path without '..'")
        if str(p) in RESERVED or str(p).startswith("/.temper"):
            raise ValueError(f"{p} is reserved by the sandbox")
        return str(p)

    @model_validator(mode="after")
    def _scratch_is_writable(self) -> "Mount":
        if self.src is None and not self.writable:
            raise ValueError("a mount without src is a scratch folder and must be writable")
        if self.size_mb is not None and self.src is not None:
            raise ValueError("size_mb is for a scratch folder (no src)")
        return self


class TaskMaxima(ConfigModel):
    """The most a task folder's task.toml may ask for (datasets come from strangers): a value above is
    clamped to it; one above `absurd_factor` times it is refused with one line naming the task folder."""

    cpus: float = Field(8.0, gt=0, description="CPU cores a task may ask for.")
    memory_mb: int = Field(16384, ge=64, description="Memory a task may ask for.")
    storage_mb: int = Field(16384, ge=1, description="Writable space a task may ask for.")
    agent_timeout_s: float = Field(7200.0, gt=0, description="The agent phase's time a task may ask for.")
    verifier_timeout_s: float = Field(1800.0, gt=0, description="The verifier's time a task may ask for.")
    folder_mb: int = Field(256, ge=1, description="Largest task folder (all its files) the loader accepts.")
    absurd_factor: float = Field(1000.0, ge=1, description="A request above this many times its maximum is refused.")
    internet: bool = Field(True, description="Whether a task's allow_internet = true is granted (image tasks: "
                           "egress through the host's network); false: every task gets loopback only.")
    internet_hosts: list[str] = Field(["*"], min_length=1, description=(
        "Where a task granted the internet may connect: with '*' among them anywhere (a route out, slirp4netns); "
        "else only these host or host:port patterns (shell wildcards, e.g. '*.pythonhosted.org'), through an "
        "allowlisting HTTP(S) proxy on the sandbox's own 127.0.0.1:3128 that every command's HTTP(S)_PROXY names."))


class ImageRoot(ConfigModel):
    """An image as the sandbox's root filesystem (temper.images gives it): its layers read-only under a
    writable layer on disk, its ENV, WORKDIR and USER for every command; root inside is `uid_base` outside."""

    layers: list[Path] = Field(min_length=1, description="Unpacked layer folders, lowest first.")
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    uid_base: int = Field(1_000_000, ge=65536)
    network: Literal["loopback", "egress"] = Field(
        "loopback", description="loopback: the sandbox's own only; egress: also out through the host's network "
        "(never the host's loopback), for a task that asks for the internet.")
    egress_hosts: list[str] = Field(["*"], min_length=1, description=(
        "With egress: with '*' among them anywhere (slirp4netns), else only these host or host:port patterns, "
        "through an allowlisting proxy on 127.0.0.1:3128 (TaskMaxima.internet_hosts)."))

    @property
    def egress_proxy(self) -> bool:
        """Egress to an allowlist: through the proxy, with no route out."""
        return self.network == "egress" and "*" not in self.egress_hosts


class SandboxConfig(ConfigModel):
    isolation: Isolation = "auto"
    limits: Limits = Limits()
    workspace: Path | None = Field(None, description="Template folder copied (overlay) into every sandbox.")
    workspace_mount: str = Field("/app", description="Where the workspace appears inside (bwrap mode).")
    mounts: list[Mount] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="Added to every exec's environment.")
    python_env: Path | None = Field(
        None, description="Read-only Python with pytest for the sandbox; None = the one scripts/setup.sh built."
    )
    supervisor_python: Path = Field(Path("/usr/bin/python3"), description="Runs the in-sandbox supervisor.")
    uid: int = Field(61000, ge=1000, description="Owns the staged templates; sandboxes run as uid+1...uid+uid_slots.")
    uid_slots: int = Field(4096, ge=1, description="Host uids, one per live sandbox (as root); a new one fails when "
                           "all are leased.")
    cgroups: bool = Field(True, description="Use cgroups for memory/pids/CPU where the host offers them.")
    state_dir: Path = Field(
        Path(tempfile.gettempdir()) / "temper-sandbox", description="Staged templates, per-sandbox folders."
    )
    run_dir: Path = Field(Path("runs/sandbox"), description="Run folder; the audit log is written here.")
    audit: bool = True
    pool_size: int = Field(2, ge=0, description="Idle warm sandboxes the pool keeps ready.")
    pool_max: int = Field(64, ge=1, description="Most sandboxes a pool keeps alive (idle + in use).")
    task_max: TaskMaxima = TaskMaxima()
    image: ImageRoot | None = Field(None, description="Run on an image's root filesystem (bwrap only): root in a "
                                    "user namespace of 65,536 ids, processes kept until reset, loopback network.")

    @model_validator(mode="after")
    def _image_alone(self) -> "SandboxConfig":
        if self.image is not None and (any(m.src is not None for m in self.mounts) or self.workspace is not None):
            raise ValueError("image: the image is the whole filesystem; a workspace or a mount of a host folder does "
                             "not apply (scratch mounts do: a folder of the image, a tmpfs of its own with size_mb)")
        if self.image is not None and self.isolation in ("landlock", "none"):
            raise ValueError(f"image: needs bwrap isolation (isolation is {self.isolation})")
        return self

    @field_validator("workspace_mount")
    @classmethod
    def _mount_ok(cls, v: str) -> str:
        return Mount(dest=v, writable=True).dest

    @property
    def audit_path(self) -> Path:
        return self.run_dir / "sandbox-audit.jsonl"
