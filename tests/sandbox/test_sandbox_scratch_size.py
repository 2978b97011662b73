"""A scratch mount with `size_mb` is a filesystem of its own (bwrap mode): what fills the sandbox's
disk (workspace, /tmp, other scratch mounts) leaves it room, it is bounded by its own size, and a
reset empties it. An episode's /logs is one, so the verifier can always write its reward."""

from pathlib import Path

from conftest import make_config

from temper.sandbox import Limits, Mount, Sandbox


def test_a_sized_scratch_mount_is_a_filesystem_of_its_own(state_dir: Path, template: Path, tmp_path: Path) -> None:
    cfg = make_config("bwrap", state_dir, template, tmp_path, limits=Limits(disk_mb=16, wall_time_s=20),
                      mounts=[Mount(dest="/logs", writable=True, size_mb=4), Mount(dest="/scratch", writable=True)])
    with Sandbox(cfg) as sb:
        sb.exec("dd if=/dev/zero of=/tmp/fill bs=64K 2>/dev/null; dd if=/dev/zero of=/scratch/f bs=4K 2>/dev/null")
        assert sb.exec("echo x > /tmp/more").exit_code != 0  # the sandbox's disk is full...
        assert sb.exec("echo ok > /logs/r && cat /logs/r").stdout == b"ok\n"  # ...and /logs is not
        assert sb.exec("dd if=/dev/zero of=/logs/big bs=64K count=128 2>/dev/null").exit_code != 0  # 8 MiB > 4
        sb.exec("rm /logs/big")
        sb.write_file("/logs/host.txt", "from the host")
        assert sb.read_file("/logs/host.txt") == b"from the host"
        sb.reset()
        assert sb.exec("ls -A /logs /tmp").stdout.split() == [b"/logs:", b"/tmp:"]
        assert sb.exec("echo ok > /logs/r && echo ok > /tmp/r").exit_code == 0
