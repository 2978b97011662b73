"""Fixtures for the sandbox tests: real bubblewrap, real processes, both isolation modes.

One sandbox per mode per test module keeps the suite fast; every attack test ends by
checking that the same sandbox, reset, still runs a command (`healthy`).
"""

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from temper.images import layers
from temper.sandbox import ImageRoot, Limits, Mount, Sandbox, SandboxConfig

MODES = ["bwrap", "landlock"]
IMAGE_UID_BASE = 1_000_000
IMAGE_TOOLS = ("bash", "sh", "id", "cat", "ls", "sleep", "touch", "mkdir", "rm", "env", "chown", "stat", "head", "ln",
               "kill", "grep", "seq", "yes", "nohup", "setsid", "ps", "cp", "chmod", "ipcmk", "ipcs", "du", "diff",
               "tail", "mount", "mkfifo")
IMAGE_LIBS = ("librt.so.1",)  # what the tests' python loads by name

if os.geteuid() != 0:  # sandboxes need a dedicated uid; CI and the dev machines run as root
    pytest.skip("the sandbox tests need root (to start sandboxes as a dedicated uid)", allow_module_level=True)


def tight_limits() -> Limits:
    return Limits(wall_time_s=20, cpu_time_s=1, memory_mb=256, processes=64, file_size_mb=16, open_files=64,
                  output_bytes=64 * 1024, disk_mb=64)


@pytest.fixture(scope="session")
def public_tmp() -> Iterator[Path]:
    """A folder every uid can traverse (pytest's own tmp folders are private to root)."""
    d = Path(tempfile.mkdtemp(prefix="temper-sbtest-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def state_dir(public_tmp: Path) -> Path:
    return public_tmp / "state"


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("template")
    (d / "hello.txt").write_text("hello from the template\n")
    (d / "pkg").mkdir()
    (d / "pkg" / "test_ok.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    return d


@pytest.fixture(scope="session")
def suid_dir(public_tmp: Path) -> Path:
    """A folder holding a setuid-root copy of `id` (mounted read-only into sandboxes)."""
    d = public_tmp / "suid"
    d.mkdir(mode=0o755)
    target = d / "id"
    target.write_bytes(Path("/usr/bin/id").read_bytes())
    os.chown(target, 0, 0)
    target.chmod(0o4755)
    return d


@pytest.fixture(scope="session")
def image_layers(public_tmp: Path) -> list[Path]:
    """A small image made of the host's own files (fast, offline): a base layer with bash, coreutils and the
    host's python3 with its standard library (merged /usr), then an app layer with /app/README, the template's
    hello.txt and a whiteout that deletes /etc/group. tests/images runs a Debian image built by podman."""
    root = public_tmp / "mini-rootfs"
    for d in ("usr/bin", "etc", "app", "tmp", "root", "home/agent"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for link, target in (("bin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
        (root / link).symlink_to(target)
    python = Path("/usr/bin/python3").resolve()  # the system's, not the test run's (a venv's may live anywhere)
    ask = "import sysconfig; print(sysconfig.get_paths()['stdlib'])"
    stdlib = Path(subprocess.run([python, "-c", ask], capture_output=True, text=True, check=True).stdout.strip())
    binaries = [Path(shutil.which(t) or t) for t in IMAGE_TOOLS] + [python]
    for exe in binaries:
        shutil.copy(exe.resolve(), root / "usr/bin" / exe.name)
    (root / "usr/bin/python3").symlink_to(python.name)
    shutil.copytree(stdlib, root / str(stdlib)[1:], symlinks=True,
                    ignore=shutil.ignore_patterns("test", "tests", "idlelib", "tkinter", "ensurepip", "__pycache__",
                                                  "site-packages", "dist-packages"))
    for name in IMAGE_LIBS:
        lib = next(Path(d) / name for d in ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64")
                   if (Path(d) / name).exists())
        (root / str(lib.parent)[1:]).mkdir(parents=True, exist_ok=True)
        shutil.copy(lib.resolve(), root / str(lib)[1:])
    for obj in [*binaries, *(stdlib / "lib-dynload").glob("*.so")]:  # and every library they load
        for lib in subprocess.run(["ldd", str(obj)], capture_output=True, text=True).stdout.split():
            if lib.startswith("/") and Path(lib).exists():
                dest = root / ("usr" + lib if not lib.startswith("/usr/") else lib[1:])
                dest.parent.mkdir(parents=True, exist_ok=True)
                if not dest.exists():
                    shutil.copy(Path(lib).resolve(), dest)
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/bash\nagent:x:1000:1000::/home/agent:/bin/bash\n")
    (root / "etc/group").write_text("root:x:0:\nagent:x:1000:\n")
    base_tar, app_tar = public_tmp / "base.tar", public_tmp / "app.tar"
    subprocess.run(["tar", "--numeric-owner", "-C", str(root), "-cf", str(base_tar), "."], check=True)
    app = public_tmp / "app-src"
    (app / "app").mkdir(parents=True)
    (app / "app/README").write_text("from the app layer\n")
    (app / "app/hello.txt").write_text("hello from the template\n")  # what healthy() reads, as in the template
    (app / "etc").mkdir()
    (app / "etc/.wh.group").write_text("")  # the app layer deletes /etc/group
    subprocess.run(["tar", "--numeric-owner", "-C", str(app), "-cf", str(app_tar), "."], check=True)
    out = []
    for i, tar in enumerate((base_tar, app_tar)):
        dest = public_tmp / f"layer{i}"
        with open(tar, "rb") as f:
            layers.unpack(f, dest, IMAGE_UID_BASE)
        out.append(dest)
    shutil.rmtree(root)
    return out


def make_config(mode: str, state_dir: Path, template: Path | None, run_dir: Path, *,
                image_layers: list[Path] | None = None, **kw: Any) -> SandboxConfig:
    """A sandbox of `mode` on the template; mode "image": on `image_layers` instead, whose WORKDIR holds the
    template's hello.txt (an image has no workspace and no host folder mounted: those of `kw` are dropped)."""
    limits = kw.pop("limits", tight_limits())
    if mode == "image":
        assert image_layers, "image mode: pass image_layers (the fixture)"
        kw["mounts"] = [m for m in kw.get("mounts", []) if m.src is None]
        image = ImageRoot(layers=image_layers, workdir="/app", uid_base=IMAGE_UID_BASE,
                          env={"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"})
        return SandboxConfig(image=image, state_dir=state_dir, run_dir=run_dir, limits=limits, **kw)
    return SandboxConfig(isolation=mode, workspace=template, state_dir=state_dir, run_dir=run_dir, limits=limits, **kw)


@pytest.fixture(scope="module", params=MODES)
def sbx(request: pytest.FixtureRequest, state_dir: Path, template: Path, suid_dir: Path,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    run_dir = tmp_path_factory.mktemp(f"run-{request.param}")
    cfg = make_config(request.param, state_dir, template, run_dir,
                      mounts=[Mount(dest="/opt/suid", src=suid_dir), Mount(dest="/logs", writable=True)])
    sb = Sandbox(cfg)
    assert sb.mode == request.param
    yield sb
    sb.close()


def sandbox_pids(sb: Sandbox) -> list[int]:
    """Host pids of every process in the sandbox right now (its cgroup, or its dedicated uid)."""
    sup = sb._sup
    assert sup is not None
    if sup.cgroup is not None and "pids" in sup.cgroup.dirs:
        return [int(p) for p in (sup.cgroup.dirs["pids"] / "cgroup.procs").read_text().split()]
    uid = sup._lease.uid if sup._lease is not None else sb.config.uid
    return [int(n) for n in os.listdir("/proc") if n.isdigit() and _uid_of(n) == uid]


def resident(sb: Sandbox) -> int:
    """Processes of an idle sandbox: the supervisor, and its spawner where it has one."""
    assert sb._sup is not None
    return sb._sup.resident


def _uid_of(pid: str) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def healthy(sb: Sandbox) -> None:
    """After an attack: nothing left running but the supervisor, and a reset sandbox works."""
    assert len(sandbox_pids(sb)) == resident(sb), f"processes left in the sandbox: {sandbox_pids(sb)}"
    sb.reset()
    r = sb.exec("echo ok; cat hello.txt")
    assert r.exit_code == 0 and r.stdout == b"ok\nhello from the template\n", r
