"""A Debian image built by podman (FROM python:3.13-slim-bookworm, mapped to the trixie base) run as sandboxes:
apt-get install and useradd at agent time, a server started in the background answering on the sandbox's own
127.0.0.1 in a later command, a 700 MiB file written under a 512 MiB memory limit (the writable layer is on
disk), ENV PATH and WORKDIR seen by every command."""

import shutil
import subprocess
from pathlib import Path

import pytest

from temper.images import ImagesConfig, ImageStore
from temper.sandbox import ImageRoot, Limits, Sandbox, SandboxConfig

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

DOCKERFILE = """FROM python:3.13-slim-bookworm
COPY temper-hello_1.0_all.deb /opt/debs/
ENV PATH=/opt/tools:$PATH TASK=image
WORKDIR /srv/app
RUN mkdir -p /opt/tools && printf '#!/bin/sh\\necho tool on PATH\\n' > /opt/tools/mytool && chmod +x /opt/tools/mytool
"""


def tiny_deb(folder: Path) -> None:
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


@pytest.fixture(scope="module")
def image_root(tmp_path_factory) -> ImageRoot:
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    folder = tmp_path_factory.mktemp("tasks") / "image-sandbox"
    (folder / "environment").mkdir(parents=True)
    tiny_deb(folder / "environment")
    (folder / "environment/Dockerfile").write_text(DOCKERFILE)
    store = ImageStore(ImagesConfig())
    image = store.build_task(folder)
    return ImageRoot(layers=store.layer_dirs(image), env=image.env, workdir=image.workdir, user=image.user,
                     uid_base=store.cfg.uid_base)


def config(image_root: ImageRoot, tmp_path: Path, **limits) -> SandboxConfig:
    return SandboxConfig(image=image_root, run_dir=tmp_path, limits=Limits(**{"wall_time_s": 120, **limits}))


def test_agent_time_apt_get_useradd_and_chown_as_root(image_root, tmp_path):
    with Sandbox(config(image_root, tmp_path)) as sb:
        r = sb.exec("pwd; echo $TASK; mytool; python3 --version")
        assert r.stdout.decode().splitlines() == ["/srv/app", "image", "tool on PATH", "Python 3.13" +
                                                   r.stdout.decode().splitlines()[3][len("Python 3.13"):]]
        r = sb.exec("apt-get install -y /opt/debs/temper-hello_1.0_all.deb >/dev/null 2>&1 && temper-hello")
        assert r.stdout == b"hello from a deb\n", r.stderr
        r = sb.exec("useradd -m builder && mkdir -p /srv/data && chown builder:builder /srv/data && "
                    "su builder -c 'id -un; touch /srv/data/mine' && stat -c %U /srv/data/mine")
        assert r.stdout == b"builder\nbuilder\n", r.stderr
        assert sb.exec("whoami", user="builder").stdout == b"builder\n"  # a user added at run time


def test_a_background_server_answers_on_the_sandboxes_own_loopback(image_root, tmp_path):
    with Sandbox(config(image_root, tmp_path)) as sb:
        sb.exec("mkdir -p /srv/www && echo served > /srv/www/index.html && "
                "nohup python3 -m http.server 8080 --bind 127.0.0.1 --directory /srv/www >/tmp/http.log 2>&1 &")
        r = sb.exec("for i in $(seq 50); do python3 -c \"import urllib.request as u; "
                    "print(u.urlopen('http://localhost:8080/').read().decode().strip())\" 2>/dev/null && break; "
                    "sleep 0.1; done")
        assert r.stdout == b"served\n", r.stderr


def test_a_700_mib_file_under_a_512_mib_memory_limit_lands_on_disk(image_root, tmp_path):
    with Sandbox(config(image_root, tmp_path, memory_mb=512, disk_mb=2048, file_size_mb=1024)) as sb:
        r = sb.exec("head -c 734003200 /dev/zero > /srv/app/big && stat -c %s /srv/app/big")
        assert r.exit_code == 0 and r.stdout == b"734003200\n", (r.limit, r.stderr)
        upper = sb._live()._upper
        assert (upper / "upper/srv/app/big").stat().st_size == 734003200  # in the writable layer, on disk


def test_a_reset_sandbox_equals_a_fresh_one(image_root, tmp_path):
    probe = ("cut -d: -f1 /etc/passwd | sort | tr '\\n' ' '; echo; ls -A /srv /tmp /root /home | tr '\\n' ' '; echo; "
             "ls /proc | grep -c '^[0-9]'")
    with Sandbox(config(image_root, tmp_path)) as fresh:
        want = fresh.exec(probe).stdout
    with Sandbox(config(image_root, tmp_path)) as sb:
        sb.exec("useradd -m mallory && echo x > /srv/left && echo y > /tmp/left && (sleep 600 &) && sleep 600 &")
        assert sb.exec(probe).stdout != want  # a user, files and processes more
        sb.reset()
        assert sb.exec(probe).stdout == want
