"""Configuration of task images: where they are stored, which tool builds them, and the base-image map.

No registry of container images answers on every machine (these reach only PyPI, Debian's archive and
npm), so a Dockerfile's `FROM` name resolves through the base-image map: the most specific pattern that
matches (the most characters other than wildcards) names a Debian root filesystem that mmdebstrap builds
from Debian's archive. A name that no pattern matches is pulled by the build tool as it is (where a
registry answers) or found among the images it already holds.
"""

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from temper.config import ConfigModel
from temper.firsttime import temper_home

Builder = Literal["auto", "podman", "docker"]


class BaseImage(ConfigModel):
    """A Debian root filesystem, built once by mmdebstrap (minbase variant) and imported as an image."""

    suite: str = Field(description="Debian suite: bookworm (Python 3.11) or trixie (Python 3.13).")
    python: bool = Field(False, description="Add python3 with pip and venv, `python` as python3, and let pip "
                         "install into the system Python as the python images do (no EXTERNALLY-MANAGED).")
    packages: list[str] = Field(default_factory=list, description="More Debian packages to include.")
    pip: list[str] = Field(default_factory=list, description="PyPI requirements (pinned: name==version) pip installs "
                           "into the base's system Python at build time (python: true).")

    @model_validator(mode="after")
    def _pip_needs_python(self) -> "BaseImage":
        if self.pip and not self.python:
            raise ValueError("pip: needs python: true (pip installs into the base's system Python)")
        return self


def _python(suite: str) -> BaseImage:
    return BaseImage(suite=suite, python=True)


# The browser tasks' image (docs/envs.md, web tasks): Microsoft's playwright/python images carry Ubuntu, Python,
# playwright and its own browsers; where no registry answers, Debian's chromium, fonts and the same playwright
# (pinned as the test dependency is, in pyproject.toml) stand in, the browser at /usr/bin/chromium.
# The asset tools the web tasks expect an agent to reach for are in it too: sassc (SCSS), ImageMagick and optipng
# (raster images, favicons), Pillow, and trimesh with fast-simplification (meshes).
PLAYWRIGHT = "playwright==1.65.2"
WEB_BASE = BaseImage(suite="trixie", python=True,
                     packages=["chromium", "fonts-dejavu-core", "fonts-liberation", "sassc", "imagemagick", "optipng"],
                     pip=[PLAYWRIGHT, "pillow==13.0.0", "numpy==2.5.5", "trimesh==5.2.0", "fast-simplification==0.2.0"])


DEFAULT_BASES: dict[str, BaseImage] = {
    "python:3.11*": _python("bookworm"),
    "python:3.13*": _python("trixie"),
    "python:*": _python("trixie"),  # other Python versions: the nearest Debian carries (the warning names both)
    "debian:bookworm*": BaseImage(suite="bookworm"),
    "debian:12*": BaseImage(suite="bookworm"),
    "debian:*": BaseImage(suite="trixie"),
    "ubuntu:*": BaseImage(suite="trixie"),
    "playwright/python:*": WEB_BASE,
}


def default_store() -> Path:
    """As root (image sandboxes need it), a folder every uid may traverse; else $TEMPER_HOME/images."""
    return Path("/var/cache/temper/images") if os.geteuid() == 0 else temper_home() / "images"


class ImagesConfig(ConfigModel):
    store: Path = Field(default_factory=lambda: default_store(),
                        description="Built images, unpacked layers and the build tool's own storage; its layers must "
                                    "be readable by uid_base (root's home is not): /var/cache/temper/images as root.")
    builder: Builder = Field("auto", description="auto: docker where its daemon answers, else podman.")
    bases: dict[str, BaseImage] = Field(
        default_factory=dict, description="FROM name patterns (fnmatch, on the name without registry and library/ "
        "prefix) -> the Debian base built for them, added to (or replacing an entry of) the default map.")
    default_bases: bool = Field(True, description="Start from the default map (python:3.11* -> bookworm, "
                                "python:3.13*/python:*/debian:*/ubuntu:* -> trixie); false: `bases` alone.")
    mirror: str = Field("http://deb.debian.org/debian", description="Debian archive the bases are built from.")
    host_ca_certificates: bool = Field(True, description="Copy the host's own CA certificates "
                                       "(/usr/local/share/ca-certificates) into every base, so that TLS through "
                                       "the host's proxies verifies inside builds and sandboxes.")
    build_timeout_s: float = Field(1800.0, gt=0, description="Longest build of one image (a task.toml's "
                                   "[environment] build_timeout_sec overrides it).")
    uid_base: int = Field(1_000_000, ge=65536, description="Host uid that root inside an image sandbox is; "
                          "uids 0-65535 inside map to uid_base + uid. No host account should use this range.")

    @property
    def base_map(self) -> dict[str, BaseImage]:
        return {**(DEFAULT_BASES if self.default_bases else {}), **self.bases}
