"""Host-initiated file access against what the agent planted, in every isolation mode: an upload
never follows the sandbox's links, a fifo cannot block the supervisor, and a folder of 70,000 long
names cannot blow up the listing's reply. Each is refused or cut at once; the sandbox lives on."""

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import MODES, healthy, make_config

from temper.sandbox import Limits, Mount, PathEscapeError, Sandbox, SandboxCrashed, SandboxError


@pytest.fixture(scope="module", params=[*MODES, "image"])
def sb(request: pytest.FixtureRequest, state_dir: Path, template: Path, image_layers: list[Path],
       tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    limits = Limits(wall_time_s=60, cpu_time_s=60, memory_mb=512, processes=64, open_files=64,
                    disk_mb=1024 if request.param == "image" else 256)  # an image's volume: 70,000 inodes and more
    cfg = make_config(request.param, state_dir, template, tmp_path_factory.mktemp(f"run-{request.param}"),
                      limits=limits, mounts=[Mount(dest="/logs", writable=True)], image_layers=image_layers)
    with Sandbox(cfg) as box:
        assert box.mode == request.param
        yield box


@pytest.fixture(autouse=True)
def fresh(sb: Sandbox) -> None:
    sb.reset()  # each test on a clean sandbox (restarted if an earlier one broke it)


@pytest.fixture
def outside(sb: Sandbox, public_tmp: Path) -> Iterator[str]:
    """A folder outside the folders the host may write into, that the sandbox uid may write, as
    commands see it (/dev/shm in bwrap and image mode, a host folder open to everyone in Landlock mode),
    with a file victim.txt ("original") that the sandbox uid may write."""
    if sb.mode in ("bwrap", "image"):
        assert sb.exec("echo original > /dev/shm/victim.txt").exit_code == 0
        yield "/dev/shm"
        sb.exec("rm -rf /dev/shm/*")
        return
    d = public_tmp / f"open-{time.monotonic_ns()}"
    d.mkdir()
    d.chmod(0o777)
    (d / "victim.txt").write_text("original\n")
    (d / "victim.txt").chmod(0o666)
    yield str(d)


@pytest.fixture
def payload(tmp_path: Path) -> Path:
    d = tmp_path / "payload"
    (d / "sub").mkdir(parents=True)
    (d / "evil.txt").write_text("uploaded\n")
    (d / "sub" / "deep.txt").write_text("deep\n")
    return d


def _ls(sb: Sandbox, folder: str) -> list[str]:
    """What is in the outside folder (read from the host in Landlock mode: commands may not)."""
    if sb.mode == "landlock":
        return sorted(p.name for p in Path(folder).iterdir())
    return sb.exec(["ls", "-A", folder]).stdout.decode().split()


def _cat(sb: Sandbox, path: str) -> bytes:
    return Path(path).read_bytes() if sb.mode == "landlock" else sb.exec(["cat", path]).stdout


@pytest.mark.timeout(60)
def test_upload_refuses_a_symlinked_destination_folder(sb: Sandbox, outside, payload: Path) -> None:
    seen = outside
    assert sb.exec(f"ln -s {seen} up && ln -s {seen} {sb.path('/logs/up')}").exit_code == 0
    for dest in ("up", "up/inner", "/logs/up"):
        with pytest.raises(PathEscapeError, match="symlinks are not followed"):
            sb.upload(payload, dest)
    assert "evil.txt" not in _ls(sb, seen) and "sub" not in _ls(sb, seen)
    healthy(sb)


@pytest.mark.timeout(60)
def test_upload_refuses_a_symlinked_file_or_subfolder_inside_the_destination(sb: Sandbox, outside,
                                                                           payload: Path) -> None:
    seen = outside
    r = sb.exec(f"mkdir -p up/x && ln -s {seen}/victim.txt up/evil.txt && ln -s {seen} up/x/sub")
    assert r.exit_code == 0, r
    with pytest.raises(PathEscapeError, match="symlinks are not followed"):
        sb.upload(payload, "up")
    with pytest.raises(PathEscapeError, match="symlinks are not followed"):
        sb.upload(payload, "up/x")  # up/x/sub is the link: the walk refuses to enter it
    assert _cat(sb, f"{seen}/victim.txt") == b"original\n"  # not "uploaded"
    assert "deep.txt" not in _ls(sb, seen)
    sb.exec("rm -rf up")
    sb.upload(payload, "up")  # without the links the same upload works
    assert sb.read_file("up/sub/deep.txt") == b"deep\n"
    healthy(sb)


@pytest.mark.timeout(60)
def test_a_fifo_where_the_host_reads_or_writes_fails_at_once(sb: Sandbox, payload: Path) -> None:
    logs = sb.path("/logs/verifier")  # in Landlock mode, mounts are seen at their host paths
    assert sb.exec(f"mkdir -p {logs} up && mkfifo {logs}/reward.txt pipe up/evil.txt").exit_code == 0
    start = time.monotonic()
    for attempt in (lambda: sb.read_file("/logs/verifier/reward.txt"), lambda: sb.write_file("pipe", "x"),
                    lambda: sb.upload(payload, "up")):
        with pytest.raises(SandboxError, match="not a regular file"):
            attempt()
    assert time.monotonic() - start < 5 and sb.alive
    with pytest.raises(SandboxError, match="directory"):
        sb.read_file(".")  # a folder is refused too
    healthy(sb)


@pytest.mark.timeout(120)
def test_seventy_thousand_long_names_are_listed_cut_and_the_sandbox_lives(sb: Sandbox) -> None:
    make = ("import os\nos.mkdir('many')\n"
            "for i in range(70000):\n    os.close(os.open('many/%06d' % i + 'x' * 240, os.O_CREAT | os.O_WRONLY))\n")
    r = sb.exec(["python3", "-c", make], timeout=60)
    assert r.exit_code == 0, r
    start = time.monotonic()
    listing = sb.list_files("many")
    assert listing.truncated and 1000 < len(listing) < 70000
    assert listing[0].path.startswith("000000x") and listing[0].type == "file"
    deep = sb.list_files(".", recursive=True)
    assert deep.truncated and sb.alive
    assert time.monotonic() - start < 20
    small = sb.list_files("/home" if sb.mode == "image" else "pkg")  # the image has no template's pkg/
    assert not small.truncated and [e.path for e in small] == (["agent"] if sb.mode == "image" else ["test_ok.py"])
    healthy(sb)


@pytest.mark.timeout(60)
def test_a_supervisor_killed_from_the_host_is_not_blamed_on_the_agent(sb: Sandbox) -> None:
    def kill_soon() -> None:
        time.sleep(0.5)
        assert sb._sup is not None and sb._sup._proc is not None
        os.killpg(sb._sup._proc.pid, signal.SIGKILL)  # as the host's OOM killer or an operator would

    threading.Thread(target=kill_soon).start()
    with pytest.raises(SandboxCrashed) as during:
        sb.exec("sleep 10")  # killed in the middle of the agent's command: still not its doing
    assert during.value.by_agent is False and "exited" in str(during.value)
    with pytest.raises(SandboxCrashed) as after:
        sb.read_file("hello.txt")
    assert after.value.by_agent is False
    sb.reset()  # restarts it
    assert sb.exec("echo ok").stdout == b"ok\n"
