"""FROM names resolve through the base-image map (most specific pattern first); Dockerfiles are read as
Docker reads them (ARG defaults in FROM, stages, scratch) and a build step maps back to its line."""

from pathlib import Path

import pytest

from temper.errors import TemperError
from temper.images import BaseImage, ImagesConfig, bases, dockerfile


@pytest.mark.parametrize("ref,short", [
    ("python:3.13-slim-bookworm", "python:3.13-slim-bookworm"), ("docker.io/library/ubuntu:24.04", "ubuntu:24.04"),
    ("ubuntu", "ubuntu:latest"), ("ghcr.io/org/img:1", "org/img:1"), ("localhost:5000/x", "x:latest"),
    ("debian@sha256:abc", "debian@sha256:abc")])
def test_short_names_drop_the_registry_and_library(ref, short):
    assert bases.short_name(ref) == short


@pytest.mark.parametrize("ref,suite,python", [
    ("python:3.13-slim-bookworm", "trixie", True), ("python:3.11", "bookworm", True),
    ("python:3.12-slim", "trixie", True), ("docker.io/library/ubuntu:24.04", "trixie", False),
    ("debian:bookworm-slim", "bookworm", False), ("debian:12", "bookworm", False), ("debian:trixie", "trixie", False)])
def test_the_default_map_gives_debian_bases(ref, suite, python):
    pattern, base = bases.resolve(ref, ImagesConfig())
    assert (base.suite, base.python) == (suite, python), pattern


def test_a_users_entry_joins_the_map_and_the_most_specific_pattern_wins():
    cfg = ImagesConfig(bases={"python:3.13-slim*": BaseImage(suite="bookworm", python=True, packages=["git"]),
                              "alpine:*": BaseImage(suite="trixie")})
    assert bases.resolve("python:3.13-slim-bookworm", cfg)[1].packages == ["git"]  # beats python:3.13*
    assert bases.resolve("python:3.13", cfg)[1].suite == "trixie"  # the default entry still there
    assert bases.resolve("alpine:3.20", cfg)[0] == "alpine:*"
    assert bases.resolve("nvidia/cuda:12", cfg) is None  # no entry: left to the build tool (a registry)
    assert bases.resolve("python:3.13", ImagesConfig(default_bases=False)) is None


def test_the_mmdebstrap_command_builds_python_with_pip_unlocked_and_the_host_cas(tmp_path, monkeypatch):
    ca = tmp_path / "cas"
    ca.mkdir()
    (ca / "proxy.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setattr(bases, "HOST_CA_DIR", ca)
    monkeypatch.setattr(bases.shutil, "which", lambda name: f"/usr/bin/{name}")
    cfg = ImagesConfig()
    argv = bases.mmdebstrap_argv(BaseImage(suite="trixie", python=True), cfg, tmp_path / "out.tar")
    assert argv[-3:] == ["trixie", str(tmp_path / "out.tar"), cfg.mirror]
    assert "--include=ca-certificates,python3,python3-pip,python3-venv,python-is-python3" in argv
    assert any("EXTERNALLY-MANAGED" in a for a in argv) and any(str(ca / "proxy.crt") in a for a in argv)
    key = bases.base_key(BaseImage(suite="trixie", python=True), cfg)
    (ca / "proxy.crt").write_text("another")
    assert bases.base_key(BaseImage(suite="trixie", python=True), cfg) != key  # a new CA: a new base


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_from_names_with_arg_defaults_stages_and_scratch(tmp_path):
    ins = dockerfile.parse(write(tmp_path, "ARG PY=3.13\nARG FLAVOUR\nFROM python:${PY}-slim AS build\n"
                                           "RUN make \\\n  all\nFROM build AS test\nFROM --platform=linux/amd64 "
                                           "debian:${FLAVOUR:-bookworm}\nCOPY --from=build /x /x\nFROM scratch\n"),
                           "task folder t")
    assert [(i.line, name) for i, name in dockerfile.base_images(ins)] == [(3, "python:3.13-slim"),
                                                                           (7, "debian:bookworm")]
    run = dockerfile.step_line(ins, 2)
    assert (run.cmd, run.line, run.end) == ("RUN", 4, 5)
    assert dockerfile.step_line(ins, 99) is None
    stage = ins[2]
    assert dockerfile.rewrite_from(stage, "localhost/temper-base/x:1") == "FROM localhost/temper-base/x:1 AS build\n"


def test_an_unparsable_dockerfile_is_one_line_naming_the_task(tmp_path):
    with pytest.raises(TemperError, match=r"^task folder t: Dockerfile cannot be parsed"):
        dockerfile.parse(write(tmp_path, "FROM python\nRUN <<EOF\nunterminated heredoc"), "task folder t")
