"""`temper sandbox check`: what isolation and which limits this host actually enforces.

Each line is (feature, in force?, detail). The figures come from starting a real sandbox in
the mode `isolation` resolves to, not from guesses about the host.
"""

import json
import os
import shutil
import subprocess
from dataclasses import dataclass

from temper.sandbox import bwrap, cgroups, layout, modes, seccomp, uids, volume
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import SandboxError
from temper.sandbox.inside import native

# Run inside the sandbox: every filesystem a command can create a file on, with its size (one
# entry per filesystem): the disk limit is in force only if they add up to at most disk_mb.
WRITABLE_PROBE = r"""
import json, os, tempfile
try:
    mounts = [line.split() for line in open("/proc/self/mountinfo")]
except OSError:  # Landlock mode grants no /proc: the sandbox's own folders
    mounts = []
upper = {}  # an overlay's writes land on the filesystem of its upperdir
for f in mounts:
    opts = f[f.index("-") + 3].split(",")
    up = [o[9:] for o in opts if o.startswith("upperdir=")]
    try:
        if f[f.index("-") + 1] == "overlay" and up:
            upper[os.stat(f[4]).st_dev] = os.stat(up[0]).st_dev
    except OSError:
        pass
found = {}
for d in [f[4].replace("\\040", " ") for f in mounts] + [os.getcwd(), os.environ.get("TMPDIR", "/tmp"), "/dev/shm"]:
    try:
        dev = os.stat(d).st_dev
        dev = upper.get(dev, dev)
        if os.path.islink(d) or not os.path.isdir(d) or dev in found:
            continue
        before = {k: os.statvfs(v[0]).f_ffree for k, v in found.items()}
        fd, path = tempfile.mkstemp(dir=d)
        # the same filesystem seen twice (an overlay whose upper layer is out of sight, a bind mount): the
        # new file takes an inode from one already found
        same = [k for k, n in before.items() if os.statvfs(found[k][0]).f_ffree < n]
        os.close(fd)
        os.unlink(path)
    except OSError:
        continue
    if not same:
        st = os.statvfs(d)
        found[dev] = (d, st.f_blocks * st.f_frsize)
print(json.dumps(list(found.values())))
"""


@dataclass(frozen=True)
class Feature:
    name: str
    ok: bool
    detail: str


def check(cfg: SandboxConfig) -> list[Feature]:
    out: list[Feature] = []
    b_ok, b_why = bwrap.probe(cfg.uid)
    exe = bwrap.bwrap_path()
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip() if exe else "absent"
    out.append(Feature("bubblewrap", b_ok, f"{version}: {b_why}"))
    s_ok, s_why = seccomp.available()
    out.append(Feature("seccomp", s_ok, s_why))
    abi = native.landlock_abi()
    out.append(Feature("landlock", abi > 0, f"ABI {abi}" if abi else "not available"))
    out.append(Feature("dedicated uid", *uids.describe(cfg)))
    py = layout.python_env(cfg)
    has_pytest = py is not None and (py / "bin" / "pytest").exists()
    out.append(Feature("python env", has_pytest, f"{py} (python3, pytest)" if has_pytest else
                       "no sandbox Python with pytest (run scripts/setup.sh); system python3 only"))
    out.extend(_image_features(b_ok))
    try:
        mode = modes.resolve(cfg)
    except SandboxError as exc:
        out.append(Feature("isolation", False, str(exc)))
        return out
    out.append(Feature("isolation", mode != "none", _describe(mode)))
    out.extend(_live(cfg, mode))
    return out


def _image_features(bwrap_ok: bool) -> list[Feature]:
    """What image sandboxes (SandboxConfig.image, task folders with a Dockerfile) would have here."""
    root = os.geteuid() == 0
    why = volume.unavailable()
    slirp = shutil.which("slirp4netns")
    return [
        Feature("image sandboxes", bwrap_ok and root, "root in a user namespace of 65,536 ids the host maps" if
                bwrap_ok and root else "need bwrap and root on the host"),
        Feature("image disk limit", not why, "each writable layer an ext4 filesystem of disk_mb on a loop device"
                if not why else f"writable layers unbounded on the host's disk ({why})"),
        Feature("image egress", slirp is not None, f"slirp4netns ({slirp}), never the host's loopback" if slirp
                else "slirp4netns not found: tasks that ask for the internet cannot start"),
    ]


def _describe(mode: str) -> str:
    return {
        "bwrap": "bwrap: user/pid/net/ipc/uts/cgroup/mount namespaces, no capabilities, seccomp",
        "landlock": "landlock: own uid, Landlock filesystem/TCP/signal rules, seccomp (no namespaces)",
        "image": "image: an image's root filesystem, root in a user namespace of 65,536 ids, pid/net/ipc/uts/cgroup/"
                 "mount namespaces, a container runtime's default capabilities, seccomp",
        "none": modes.NONE_WARNING,
    }[mode]


def _live(cfg: SandboxConfig, mode: str) -> list[Feature]:
    from temper.sandbox.sandbox import Sandbox  # a real sandbox says what is really in force

    version, _ = cgroups.detect() if cfg.cgroups and os.geteuid() == 0 else (None, {})
    probe = cfg.model_copy(update={"audit": False})
    with Sandbox(probe) as sb:
        r = sb.exec(["/bin/true"])
        ctrls = sb.cgroup_controllers
        out = [Feature("sandbox starts", r.exit_code == 0, f"{sb.started_s * 1e3:.0f} ms cold start, workspace at "
                       f"{sb.workdir}")]
        upper = "the writable layer's volume" if mode == "image" else "tmpfs"
        out.append(Feature("overlay reset", sb.overlay, f"kernel overlayfs on {upper}" if sb.overlay
                           else "copying fallback (no overlay here)"))
        spawner = sb._sup is not None and sb._sup.resident == 2
        out.append(Feature("fast spawn", spawner, "commands start by posix_spawn from a restricted spawner" if spawner
                           else "commands start by fork (no spawner: Landlock ABI < 6 or no dedicated uid)"))
        sup = sb._sup
        disk = mode == "bwrap" or (sup is not None and (sup._volume is not None or  # image: its ext4 volume
                                                       (sup._folder is not None and sup._folder[1])))
        w = sb.exec(["python3", "-c", WRITABLE_PROBE])
        writable = json.loads(w.stdout) if w.exit_code == 0 else None
    lim = cfg.limits
    as_mib = f"{lim.rlimit_as_bytes >> 20} MiB" if lim.rlimit_as_bytes else "unlimited"
    out.append(Feature("rlimits", True, f"cpu {lim.cpu_time_s} s, address space {as_mib}, "
                       f"processes {lim.processes}, file size {lim.file_size_mb} MiB, open files {lim.open_files}"))
    out.append(Feature("wall time", True, f"{lim.wall_time_s} s per exec, enforced by the supervisor"))
    out.append(Feature("output cap", True, f"{lim.output_bytes} bytes per stream, then cut (SIGPIPE)"))
    ram = f"{lim.memory_mb} MiB" + ("" if mode == "image" else f" + {lim.disk_mb} MiB tmpfs")
    for c, what in (("memory", ram), ("pids", f"{lim.processes}"),
                    ("cpu", f"{lim.cpus} cores")):
        out.append(Feature(f"cgroup {c}", c in ctrls, f"cgroup {version}: {what}" if c in ctrls
                           else "not in force (no usable cgroup controller; rlimits only)"))
    total = sum(size for _, size in writable) if writable is not None else None
    if writable is None:
        why = w.stderr.decode(errors="replace")[-200:]
        out.append(Feature("disk limit", False, f"could not list the writable filesystems: {why}"))
    elif disk and total is not None and total <= lim.disk_mb << 20:
        fs = "an ext4 volume on the host's disk" if mode == "image" else "tmpfs"
        out.append(Feature("disk limit", True, f"{lim.disk_mb} MiB {fs} for all writable folders "
                           f"({', '.join(d for d, _ in writable)})"))
    else:
        big = ", ".join(f"{d} ({size >> 20} MiB)" for d, size in writable)
        out.append(Feature("disk limit", False, f"not bounded by disk_mb ({lim.disk_mb} MiB) in total: writable: "
                           f"{big}; file size bounded per file"))
    return out
