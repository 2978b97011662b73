"""Base images where no registry answers: a `FROM` name resolved through the base-image map to a Debian
root filesystem that mmdebstrap builds from Debian's archive (once per machine, cached as a tarball).

Each substitution is said once per task and name, as a warning naming both.
"""

import fnmatch
import hashlib
import logging
import shlex
import shutil
import subprocess
from pathlib import Path

from temper.errors import TemperError
from temper.images.config import BaseImage, ImagesConfig

log = logging.getLogger("temper.images")
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")
PYTHON_PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3")
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class BaseImageError(TemperError):
    pass


def short_name(ref: str) -> str:
    """`docker.io/library/python:3.13-slim` -> `python:3.13-slim`; no tag means `latest`."""
    name, at, digest = ref.partition("@")
    parts = name.split("/")
    if len(parts) > 1 and ("." in parts[0] or ":" in parts[0] or parts[0] == "localhost"):
        parts = parts[1:]  # a registry host
    if parts[0] == "library" and len(parts) > 1:
        parts = parts[1:]
    name = "/".join(parts)
    if ":" not in parts[-1] and not at:
        name += ":latest"
    return name + (at + digest if at else "")


def resolve(ref: str, cfg: ImagesConfig) -> tuple[str, BaseImage] | None:
    """The most specific pattern of the map matching `ref` (most characters that are not wildcards)."""
    name = short_name(ref)
    hits = [(p, b) for p, b in cfg.base_map.items() if fnmatch.fnmatchcase(name, p)]
    return max(hits, key=lambda hit: len(hit[0].replace("*", "").replace("?", ""))) if hits else None


def describe(base: BaseImage) -> str:
    extra = " + python3 (pip, venv)" if base.python else ""
    return (f"Debian {base.suite}{extra}" + (f" + {', '.join(base.packages)}" if base.packages else "")
            + (f" + pip {', '.join(base.pip)}" if base.pip else ""))


def host_certificates(cfg: ImagesConfig) -> list[Path]:
    return sorted(HOST_CA_DIR.glob("*.crt")) if cfg.host_ca_certificates and HOST_CA_DIR.is_dir() else []


def base_key(base: BaseImage, cfg: ImagesConfig) -> str:
    """Names one base build: what it is made of (the spec, the mirror, the host certificates it carries)."""
    h = hashlib.sha256(base.model_dump_json().encode() + cfg.mirror.encode())
    for cert in host_certificates(cfg):
        h.update(cert.name.encode() + cert.read_bytes())
    return h.hexdigest()[:16]


def local_name(base: BaseImage, cfg: ImagesConfig) -> str:
    return f"localhost/temper-base/debian-{base.suite}{'-python' if base.python else ''}:{base_key(base, cfg)}"


def mmdebstrap_argv(base: BaseImage, cfg: ImagesConfig, out: Path) -> list[str]:
    exe = shutil.which("mmdebstrap")
    if exe is None:
        raise BaseImageError("mmdebstrap not found: base images are built with it (apt-get install mmdebstrap, "
                             "or bash scripts/setup.sh --with-images)")
    packages = ["ca-certificates", *(PYTHON_PACKAGES if base.python else ()), *base.packages]
    argv = [exe, "--variant=minbase", "--mode=root", "--format=tar", "--quiet",
            f"--include={','.join(packages)}", "--aptopt=Acquire::Retries \"3\""]
    for cert in host_certificates(cfg):
        argv.append(f"--customize-hook=copy-in {shlex.quote(str(cert))} /usr/local/share/ca-certificates/")
    if host_certificates(cfg):
        argv.append('--customize-hook=chroot "$1" update-ca-certificates >/dev/null')
    if base.python:  # as the python images: pip installs into the system Python
        argv.append('--customize-hook=rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED')
    if base.pip:
        reqs = " ".join(shlex.quote(r) for r in base.pip)
        argv.append(f'--customize-hook=chroot "$1" python3 -m pip install --quiet --no-cache-dir {reqs}')
    return [*argv, base.suite, str(out), cfg.mirror]


def build_rootfs(base: BaseImage, cfg: ImagesConfig, out: Path, timeout_s: float) -> None:
    """The base's root filesystem as a tarball at `out` (written whole or not at all)."""
    tmp = out.with_name(f".{out.name}.partial")
    try:
        r = subprocess.run(mmdebstrap_argv(base, cfg, tmp), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        tmp.unlink(missing_ok=True)
        raise BaseImageError(f"base image {describe(base)}: mmdebstrap ran past {timeout_s:.0f} s") from None
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        tail = " | ".join((r.stderr or r.stdout).strip().splitlines()[-5:])
        raise BaseImageError(f"base image {describe(base)}: mmdebstrap failed (exit {r.returncode}): {tail}")
    tmp.rename(out)
