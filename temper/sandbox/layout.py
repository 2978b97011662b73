"""What every launch mode shares: the environment inside, the state folder, the supervisor's init.

`Plan` is the host's description of one sandbox: the in-sandbox paths commands see and the
init message the supervisor sets itself up from.
"""

import os
import resource
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temper.sandbox import leftovers
from temper.sandbox.config import SandboxConfig

INSIDE_DIR = Path(__file__).parent / "inside"
SANDBOX_UID = 1000  # the uid commands see inside a bwrap sandbox
ETC_FILES = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "nsswitch.conf")
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")
PASSWD = ("root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/tmp:/bin/bash\n"
          "nobody:x:65534:65534::/:/bin/false\n")
GROUP = "root:x:0:\nsandbox:x:1000:\nnobody:x:65534:\n"


@dataclass
class Plan:
    mode: str
    workdir: str  # the workspace as commands see it
    dest_map: dict[str, str]  # configured mount dest -> path commands see (differs in Landlock mode)
    init: dict[str, Any]


SYSTEM_PYTHON_ENV = Path("/var/cache/temper/sandbox-python")  # where scripts/setup.sh builds it as root
BUILDING = ".temper-building"  # in a sandbox Python still being built (removed by its last step)


def repo_python_env() -> Path | None:
    """The read-only Python with pytest that scripts/setup_sandbox_python.sh builds, if it exists and is
    complete (same search order)."""
    env = os.environ.get("TEMPER_SANDBOX_PYTHON")
    repo_env = Path(__file__).resolve().parents[2] / ".cache" / "sandbox-python"
    cands = [Path(env)] if env else [SYSTEM_PYTHON_ENV, repo_env]
    # .temper-building: scripts/setup_sandbox_python.sh was interrupted there; the next set-up rebuilds it
    return next((c for c in cands if (c / "bin" / "python3").exists() and not (c / BUILDING).exists()), None)


def python_env(cfg: SandboxConfig) -> Path | None:
    return cfg.python_env if cfg.python_env is not None else repo_python_env()


def base_env(cfg: SandboxConfig, workdir: str, tmp: str) -> dict[str, str]:
    py = python_env(cfg)
    path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    env = {
        "PATH": f"{py}/bin:{path}" if py else path,
        "HOME": tmp,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "USER": "sandbox",
        "TEMPER_WORKSPACE": workdir,
    }
    if py:
        env["VIRTUAL_ENV"] = str(py)
    return {**env, **cfg.env}


def rlimits(cfg: SandboxConfig) -> list[tuple[str, int, int]]:
    lim = cfg.limits
    inf = resource.RLIM_INFINITY
    out = [
        ("cpu", lim.cpu_time_s, lim.cpu_time_s + 1),  # SIGXCPU first, SIGKILL a second later
        ("nproc", lim.processes + 2, lim.processes + 2),  # + the supervisor and its spawner (same uid)
        ("fsize", lim.file_size_mb << 20, lim.file_size_mb << 20),
        ("nofile", lim.open_files, lim.open_files),
        ("core", 0, 0),
    ]
    as_bytes = lim.rlimit_as_bytes
    out.append(("as", as_bytes if as_bytes is not None else inf, as_bytes if as_bytes is not None else inf))
    return out


_compiled = False


def precompile_inside() -> None:
    """Cache the supervisor's bytecode once (same magic number for every 3.11 build), so that a
    cold start does not compile it. Harmless where the package folder is read-only."""
    global _compiled
    if not _compiled:
        _compiled = True
        import compileall

        compileall.compile_dir(INSIDE_DIR, quiet=2, legacy=False)


def state_dir(cfg: SandboxConfig) -> Path:
    """The state folder, readable (not writable) by sandbox uids; passwd/group files for bwrap."""
    root = cfg.state_dir
    etc = root / "etc"
    if not (etc / "group").exists():
        etc.mkdir(parents=True, exist_ok=True)
        for name, text in (("passwd", PASSWD), ("group", GROUP)):
            tmp = etc / f".{name}.{os.getpid()}"
            tmp.write_text(text)
            tmp.chmod(0o644)
            os.replace(tmp, etc / name)
        for d in (root, etc):
            d.chmod(0o755)
    (root / "templates").mkdir(exist_ok=True, mode=0o755)
    (root / "locks").mkdir(exist_ok=True, mode=0o700)  # build locks record owners: not for sandbox uids to read
    if root not in _swept:  # once per process: what crashed runs left here (their owners are gone)
        _swept.add(root)
        leftovers.sweep(root)
    precompile_inside()
    return root


_swept: set[Path] = set()


def common_init(cfg: SandboxConfig, mode: str, kill: str) -> dict[str, Any]:
    return {
        "mode": mode,
        "kill": kill,
        "cpu_s": cfg.limits.cpu_time_s,
        "output_bytes": cfg.limits.output_bytes,
        "rlimits": rlimits(cfg),
    }
