"""A task folder's Dockerfile built by podman without a daemon, on the Debian base its FROM name maps to:
apt and pip steps (offline: a local .deb and a local wheel), ENV and WORKDIR kept, every layer unpacked once;
an unchanged task is not rebuilt, and a failing step is one error naming the task folder and the line."""

import json
import logging
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from temper.errors import TemperError
from temper.images import ImagesConfig, ImageStore, layers

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

def tiny_deb(folder: Path) -> Path:
    root = folder / "pkg"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text("Package: temper-hello\nVersion: 1.0\nArchitecture: all\n"
                                         "Maintainer: t <t@t>\nDescription: test\n")
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/temper-hello").write_text("#!/bin/sh\necho hello from a deb\n")
    (root / "usr/bin/temper-hello").chmod(0o755)
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(folder / "temper-hello_1.0_all.deb")],
                   check=True, capture_output=True)
    shutil.rmtree(root)
    return folder / "temper-hello_1.0_all.deb"


def tiny_wheel(folder: Path) -> Path:
    path = folder / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("tinypkg/__init__.py", "ANSWER = 42\n")
        z.writestr("tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n")
        z.writestr("tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n")
        z.writestr("tinypkg-1.0.dist-info/RECORD", "")
    return path


def task(tmp_path: Path, name: str, dockerfile: str) -> Path:
    folder = tmp_path / name
    env = folder / "environment"
    env.mkdir(parents=True)
    tiny_deb(env)
    tiny_wheel(env)
    (env / "Dockerfile").write_text(dockerfile)
    return folder


DOCKERFILE = """FROM python:3.13-slim-bookworm
COPY temper-hello_1.0_all.deb tinypkg-1.0-py3-none-any.whl /tmp/
RUN apt-get install -y /tmp/temper-hello_1.0_all.deb && pip install --no-index /tmp/tinypkg-1.0-py3-none-any.whl
ENV GREETING=hi PATH=/opt/tools:$PATH
WORKDIR /app
RUN useradd -m agent && mkdir -p /opt/tools && chown agent /app
"""


@pytest.fixture(scope="module")
def store() -> ImageStore:
    """The machine's image store (its bases were built by scripts/setup.sh --with-images)."""
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images installs both
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    return ImageStore(ImagesConfig())


def test_a_dockerfile_builds_on_its_mapped_base_and_unpacks_once(store, tmp_path, caplog):
    folder = task(tmp_path, "apt-and-pip", DOCKERFILE + f"RUN echo {tmp_path.name} > /app/built-for\n")  # a new key
    with caplog.at_level(logging.WARNING, logger="temper.images"):
        image = store.build_task(folder)
    said = [r.getMessage() for r in caplog.records if "FROM python:3.13-slim-bookworm" in r.getMessage()]
    assert len(said) == 1 and "task folder apt-and-pip" in said[0] and "Debian trixie" in said[0]
    assert image.key in store.built and image.source == "dockerfile" and image.build_s > 0
    assert image.substitutions == {"python:3.13-slim-bookworm": "Debian trixie + python3 (pip, venv)"}
    assert image.env["GREETING"] == "hi" and image.env["PATH"].startswith("/opt/tools:") and image.workdir == "/app"
    dirs = store.layer_dirs(image)
    def find(rel: str) -> list[Path]:
        return [d / rel for d in dirs if (d / rel).exists() or (d / rel).is_symlink()]
    assert find("usr/bin/python3") and find("usr/bin/temper-hello") and find("app/built-for")
    assert find("usr/local/lib/python3.13/dist-packages/tinypkg/__init__.py")
    passwd = find("etc/passwd")[-1].read_text()
    assert "agent:x:1000:1000" in passwd
    cfg = store.cfg
    assert find("app")[-1].stat().st_uid == cfg.uid_base + 1000  # chown agent /app, shifted
    assert find("usr/bin/python3")[0].lstat().st_uid == cfg.uid_base  # root inside is uid_base outside

    again = ImageStore(cfg)  # another process: finds it by content, builds nothing
    assert again.build_task(folder) == image and again.built == []
    lowest = dirs[0].stat().st_mtime_ns
    other = store.build_task(task(tmp_path, "same-base", "FROM python:3.13\nRUN echo other > /other\n"))
    assert store.layer_dirs(other)[0] == dirs[0] and dirs[0].stat().st_mtime_ns == lowest  # the base shared
    use = store.disk_use()  # the two on disk: their layers once each (the store may hold other images too)
    both = sum(layers.disk_bytes(store.layer_dir(d)) for d in set(image.layers) | set(other.layers))
    assert both < use[f"image:{image.key}"] + use[f"image:{other.key}"]


def test_a_failing_step_names_the_task_folder_the_line_and_the_output(store, tmp_path):
    folder = task(tmp_path, "broken-step", "FROM python:3.13-slim-bookworm\nENV X=1\n\nRUN echo about to fail && "
                                           f"exit 3 # {tmp_path.name}\nRUN true\n")
    with pytest.raises(TemperError) as err:
        store.build_task(folder)
    msg = str(err.value)
    assert msg.startswith("task folder broken-step: building Dockerfile line 4 (RUN echo about to fail")
    last = json.loads((store.root / "builds.jsonl").read_text().splitlines()[-1])
    assert (last["outcome"], Path(last["task"]).name) == ("failed", "broken-step") and "line 4" in last["error"]
    assert "about to fail" in msg.split("):", 1)[1] and "\n" not in msg


def test_the_docs_examples_build_list_and_run(store, tmp_path):
    """docs/images.md's commands and its Python example, as written, from the repository root (`#>` lines:
    the output it must print)."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs/images.md").read_text()
    block = doc.split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.splitlines() == [".venv/bin/temper image build examples/images/greet", ".venv/bin/temper image ls"]
    out = subprocess.run(["bash", "-e", "-c", block], cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "greet: image " in out.stderr and "python:3.13-slim-bookworm -> Debian trixie" in out.stdout
    (image,) = store.find("greet")[-1:]
    assert image.env["GREETING"] == "hello from the image" and image.workdir == "/app"
    assert any((d / "app/greet.py").is_file() for d in store.layer_dirs(image))
    example = doc.split("```python\n", 1)[1].split("```", 1)[0]
    want = [line[3:] for line in example.splitlines() if line.startswith("#> ")]
    (tmp_path / "examples").symlink_to(root / "examples")  # its run folder (runs/sandbox) lands in tmp_path
    ran = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 0 and ran.stdout.splitlines() == [*want, ""], ran.stderr[-2000:]
