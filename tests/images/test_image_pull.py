"""`temper image pull` against a real registry: Debian's docker-registry (distribution) on 127.0.0.1, an image
pushed to it by podman and gone from podman's own storage, then pulled by name into temper's store."""

import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.request

import pytest
from typer.testing import CliRunner

from temper.images import ImagesConfig, ImageStore

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """host:port of a registry of our own, plain HTTP, marked insecure for podman through its own config file."""
    exe = shutil.which("docker-registry")
    if exe is None or shutil.which("podman") is None:  # scripts/setup.sh --with-images installs both
        pytest.fail("docker-registry and podman are needed: bash scripts/setup.sh --with-images", pytrace=False)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    where = f"127.0.0.1:{port}"
    (tmp_path / "registry.yml").write_text(json.dumps({  # YAML's superset: JSON
        "version": 0.1, "log": {"level": "info"}, "http": {"addr": where},
        "storage": {"filesystem": {"rootdirectory": str(tmp_path / "blobs")}}}))
    conf = tmp_path / "registries.conf"
    conf.write_text(f'[[registry]]\nlocation = "{where}"\ninsecure = true\n')
    monkeypatch.setenv("CONTAINERS_REGISTRIES_CONF", str(conf))  # podman, run by the test and by the store
    with open(tmp_path / "registry.log", "wb") as log:
        proc = subprocess.Popen([exe, "serve", str(tmp_path / "registry.yml")], stdout=log, stderr=log)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://{where}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield where, tmp_path / "registry.log"
    finally:
        proc.kill()
        proc.wait()


def test_an_image_is_pulled_by_name_from_a_registry(registry, tmp_path):
    where, log = registry
    ref = f"{where}/temper-test/tiny:{os.getpid()}"
    rootfs = io.BytesIO()
    with tarfile.open(fileobj=rootfs, mode="w") as tar:
        info = tarfile.TarInfo("srv/hello.txt")
        data = b"pulled from a registry\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    subprocess.run(["podman", "import", "--change", "WORKDIR=/srv", "--change", "ENV=GREETING=hi", "-", ref],
                   input=rootfs.getvalue(), check=True, capture_output=True)
    subprocess.run(["podman", "push", ref], check=True, capture_output=True)
    subprocess.run(["podman", "rmi", ref], check=True, capture_output=True)  # only the registry has it now
    store = ImageStore(ImagesConfig(store=tmp_path / "store"))  # a long path: podman's runroot goes elsewhere
    try:
        image = store.pull(ref)
        assert image.source == "pull" and image.name == ref and image.workdir == "/srv"
        assert image.env.get("GREETING") == "hi"
        (layer,) = store.layer_dirs(image)
        assert (layer / "srv/hello.txt").read_text() == "pulled from a registry\n"
        assert f"/v2/temper-test/tiny/manifests/{os.getpid()}" in log.read_text()  # it came from the registry
        from temper.cli.main import app

        listed = CliRunner().invoke(app, ["image", "ls", "--set", f"store={tmp_path / 'store'}"])
        assert listed.exit_code == 0 and ref in listed.output and "pull" in listed.output, listed.output
    finally:
        subprocess.run(["podman", "rmi", "-f", ref], capture_output=True)
