"""bubblewrap launch: every namespace unshared, no capabilities, a dedicated unprivileged uid.

The mount view holds only the read-only system folders, a few files of /etc, the Python
environment, the staged templates (hidden again once mounted) and what the task names;
/proc is private, /dev minimal and read-only (/dev/shm is on the sandbox's sized tmpfs,
/dev/mqueue its own IPC namespace's), and there is no host socket anywhere in it.
"""

import compileall
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from temper.firsttime import build_once
from temper.sandbox import egress_proxy, layout
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import SandboxError
from temper.sandbox.layout import INSIDE_DIR, SANDBOX_UID, Plan

RW = "/.temper/rw"
TEMPLATES = "/.temper/templates"


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def plan(cfg: SandboxConfig, template_key: str | None, info_fd: int,
         templates: Path | None = None) -> tuple[list[str], Plan]:
    """`templates`: the staged templates as the sandbox's uid sees them (uids.lease_for)."""
    state = layout.state_dir(cfg)
    a = [bwrap_path() or "bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
         "--cap-drop", "ALL", "--clearenv", "--as-pid-1", "--info-fd", str(info_fd),
         "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--hostname", "sandbox"]
    for d in layout.SYSTEM_DIRS:
        if os.path.islink(d):
            a += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            a += ["--ro-bind", d, d]
    for name in layout.ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            a += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    a += ["--ro-bind", str(state / "etc" / "passwd"), "/etc/passwd",
          "--ro-bind", str(state / "etc" / "group"), "/etc/group",
          "--proc", "/proc", "--dev", "/dev", "--dir", "/dev/mqueue",
          "--remount-ro", "/dev",  # else a tmpfs of half the RAM the sandbox uid owns, never reset
          "--dir", "/tmp", "--dir", RW,
          "--ro-bind", str(inside_copy(state)), "/.temper/inside",
          "--ro-bind", str(templates or state / "templates"), TEMPLATES]
    py = layout.python_env(cfg)
    if py is not None:
        if Path(py).resolve().is_relative_to("/tmp"):  # the sandbox's own /tmp would hide it
            raise SandboxError(f"sandbox python_env {py} lies under /tmp, which every sandbox replaces with its "
                               f"own; build it elsewhere (TEMPER_SANDBOX_PYTHON, see scripts/setup.sh)")
        a += ["--ro-bind", str(py), str(py)]  # same path inside: its scripts' #! lines name it
    lower = f"{TEMPLATES}/{template_key}" if template_key else None
    views = [{"name": "ws", "dest": cfg.workspace_mount, "lower": lower}]
    a += ["--dir", cfg.workspace_mount]
    hide = [TEMPLATES]
    for i, m in enumerate(cfg.mounts):
        if m.src is not None and not m.writable:
            a += ["--ro-bind", str(m.src), m.dest]
            continue
        a += ["--dir", m.dest]
        lower = None
        if m.src is not None:
            lower = f"/.temper/src/{i}"
            a += ["--ro-bind", str(m.src), lower]
            if "/.temper/src" not in hide:
                hide.append("/.temper/src")
        views.append({"name": f"m{i}", "dest": m.dest, "lower": lower, "size": m.size_mb and m.size_mb << 20})
    a += ["--chdir", "/", "--remount-ro", "/", "--",
          str(cfg.supervisor_python), "-S", "-B", "/.temper/inside/supervisor.py"]
    init = layout.common_init(cfg, "bwrap", "ns")
    init.update(
        template_root=TEMPLATES,
        folders={"mode": "mount", "rw_root": RW, "disk_bytes": cfg.limits.disk_mb << 20, "views": views,
                 "tmp": "/tmp", "hide": hide, "readable": [m.dest for m in cfg.mounts]},
        env=layout.base_env(cfg, cfg.workspace_mount, "/tmp"),
    )
    dest_map = {m.dest: m.dest for m in cfg.mounts}
    return a, Plan("bwrap", cfg.workspace_mount, dest_map, init)


LAYERS, ROOT = "/.temper/layers", "/.temper/root"


def plan_image(cfg: SandboxConfig, info_fd: int, block_fd: int, upper: Path) -> tuple[list[str], Plan]:
    """An image sandbox: bwrap as the image's root (host uid `uid_base`) in a user namespace whose 65,536-id
    map the host writes while bwrap waits on `block_fd`. The supervisor keeps every capability of that
    namespace (to mount the image's overlay); its commands get a container runtime's default set."""
    img = cfg.image
    assert img is not None
    state = layout.state_dir(cfg)
    a = [bwrap_path() or "bwrap", "--unshare-user", "--userns-block-fd", str(block_fd), "--unshare-pid",
         "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
         "--new-session", "--clearenv", "--as-pid-1", "--info-fd", str(info_fd), "--uid", "0", "--gid", "0",
         "--cap-add", "ALL", "--hostname", "sandbox"]
    for d in layout.SYSTEM_DIRS:  # the supervisor's Python; commands never see these (they live in the image)
        if os.path.islink(d):
            a += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            a += ["--ro-bind", d, d]
    for name in layout.ETC_FILES:
        if os.path.exists(f"/etc/{name}"):
            a += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    a += ["--proc", "/proc", "--dev", "/dev", "--dir", "/dev/mqueue", "--remount-ro", "/dev", "--dir", "/tmp",
          "--ro-bind", str(inside_copy(state)), "/.temper/inside", "--ro-bind", str(state / "templates"), TEMPLATES]
    layers = [f"{LAYERS}/{i}" for i in range(len(img.layers))]
    for src, dest in zip(img.layers, layers, strict=True):
        a += ["--ro-bind", str(src), dest]
    a += ["--bind", str(upper), RW, "--dir", ROOT, "--chdir", "/", "--remount-ro", "/", "--",
          str(cfg.supervisor_python), "-S", "-B", "/.temper/inside/supervisor.py"]
    init = layout.common_init(cfg, "image", "image")
    init["rlimits"] = [r for r in init["rlimits"] if r[0] != "nproc"]  # one host uid for all: the pids cgroup counts
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **img.env, **cfg.env}
    if img.egress_proxy:  # the only way out: what pip, apt, npm, git and curl read
        proxy = f"http://127.0.0.1:{egress_proxy.PORT}"
        env.update({k: proxy for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
                   NO_PROXY="localhost,127.0.0.1,::1", no_proxy="localhost,127.0.0.1,::1")
    init.update(template_root=TEMPLATES, env=env,
                folders={"mode": "image", "rw_root": RW, "disk_bytes": cfg.limits.disk_mb << 20, "layers": layers,
                         "volumes": [{"dest": m.dest, "size": m.size_mb and m.size_mb << 20} for m in cfg.mounts],
                         "workdir": img.workdir or "/",
                         "dns": "10.0.2.3" if img.network == "egress" and not img.egress_proxy else None})
    return a, Plan("image", img.workdir or "/", {}, init)


_inside: dict[Path, Path] = {}


def inside_copy(state: Path) -> Path:
    """The supervisor's code (and bytecode) copied into the state folder, once per version: a
    bind mount's source shows in /proc/self/mountinfo, and it must not name the checkout."""
    if state not in _inside:
        files = sorted(p for p in INSIDE_DIR.rglob("*") if p.is_file())
        digest = hashlib.sha256(repr([(str(p.relative_to(INSIDE_DIR)), p.stat().st_size, p.stat().st_mtime_ns)
                                      for p in files]).encode()).hexdigest()[:16]
        dest = state / "inside" / digest
        if not dest.is_dir():
            dest.parent.mkdir(mode=0o755, exist_ok=True)
            build_once(dest, "the sandbox supervisor's code", _copy_inside, marker=False,  # killed: no half copy
                       lock=state / "locks" / f"inside-{digest}.lock")
        _inside[state] = dest
    return _inside[state]


def _copy_inside(tmp: Path) -> None:
    tmp.rmdir()  # copytree makes it
    shutil.copytree(INSIDE_DIR, tmp)  # copy2 keeps mtimes: cached bytecode stays valid
    tmp.chmod(0o755)
    compileall.compile_dir(tmp, quiet=2, legacy=False)  # where the package folder had none


_probe: dict[tuple[int | None, str], tuple[bool, str]] = {}


def probe(uid: int | None) -> tuple[bool, str]:
    """Can bwrap unshare every namespace as `uid` here? (cached per process)"""
    exe = bwrap_path()
    if exe is None:
        return False, "bwrap not found (apt-get install bubblewrap)"
    key = (uid, exe)
    if key not in _probe:
        argv = [exe, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                "--ro-bind", "/usr", "/usr", "--proc", "/proc", "--dev", "/dev"]
        for d in layout.SYSTEM_DIRS[1:]:
            if os.path.islink(d):
                argv += ["--symlink", os.readlink(d), d]
        full, kw = as_uid(uid, [*argv, "--", "/usr/bin/true"])
        who = uid if os.geteuid() == 0 and uid is not None else os.getuid()
        try:
            r = subprocess.run(full, capture_output=True, timeout=20, **kw)
            ok = r.returncode == 0
            why = "" if ok else r.stderr.decode(errors="replace").strip().splitlines()[-1:]
            _probe[key] = (ok, f"bubblewrap works as uid {who}" if ok else f"bwrap fails: {why}")
        except (OSError, subprocess.TimeoutExpired) as exc:
            _probe[key] = (False, f"bwrap fails: {exc}")
    return _probe[key]


def as_uid(uid: int | None, argv: list[str]) -> tuple[list[str], dict]:
    """`argv` started as `uid` (only possible as root): through setpriv where it exists, since
    Popen(user=...) must fork() rather than vfork(), which costs ~30 ms from a process holding
    a large heap (a trainer with torch loaded); else through Popen(user=...)."""
    if uid is None or os.geteuid() != 0:
        return argv, {}
    setpriv = shutil.which("setpriv")
    if setpriv:
        return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv], {}
    return argv, {"user": uid, "group": uid, "extra_groups": []}
