"""Where an image sandbox's writable layer lives: a filesystem of its own, of `disk_mb` (a task's storage_mb),
on the host's disk, so that the layer is bounded on disk and not by the host's free space or its RAM.

Each sandbox gets a sparse file holding an ext4 filesystem (copied from a template formatted once per size: a
few MiB of metadata, milliseconds), attached to a loop device and mounted where its writable layer goes; it is
unmounted and deleted with the sandbox. Writes past the size fail (ENOSPC) and `statfs` inside shows it. (These
hosts' kernels have no disk quotas, which would bound one shared volume instead.) Where it cannot be made (no
root, no loop devices, no mkfs.ext4) the layers go on the host's disk unbounded, and that is said once.
"""

import contextlib
import ctypes
import fcntl
import logging
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from temper.firsttime import build_once, drop_owner, write_owner

log = logging.getLogger("temper.sandbox")
_libc = ctypes.CDLL(None, use_errno=True)
_LOOP_CTL_GET_FREE, _LOOP_CONFIGURE, _LO_FLAGS_AUTOCLEAR = 0x4C82, 0x4C0A, 4
_MS_NOSUID, _MS_NODEV, _MNT_DETACH = 2, 4, 2
_said: set[str] = set()
BYTES_PER_INODE = 8192


class _LoopInfo64(ctypes.Structure):
    _fields_ = [("device", ctypes.c_uint64), ("inode", ctypes.c_uint64), ("rdevice", ctypes.c_uint64),
                ("offset", ctypes.c_uint64), ("sizelimit", ctypes.c_uint64), ("number", ctypes.c_uint32),
                ("encrypt_type", ctypes.c_uint32), ("encrypt_key_size", ctypes.c_uint32), ("flags", ctypes.c_uint32),
                ("file_name", ctypes.c_uint8 * 64), ("crypt_name", ctypes.c_uint8 * 64),
                ("encrypt_key", ctypes.c_uint8 * 32), ("init", ctypes.c_uint64 * 2)]


class _LoopConfig(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_uint32), ("block_size", ctypes.c_uint32), ("info", _LoopInfo64),
                ("reserved", ctypes.c_uint64 * 8)]


@dataclass
class Volume:
    mount: Path  # the writable layer's folder
    image: Path | None  # its filesystem's file (None: a plain folder on the host's disk, unbounded)


def attach(state: Path, name: str, size_bytes: int, owner: int) -> Volume:
    """A new, empty folder for a writable layer of at most `size_bytes`, owned by host uid `owner`."""
    parent = state / "uppers"
    parent.mkdir(mode=0o711, exist_ok=True)
    mount = parent / name
    write_owner(mount)  # first: a layer whose owner is gone is a crashed run's (leftovers.py)
    mount.mkdir(mode=0o700)
    why = unavailable()
    if why:
        if why not in _said:
            _said.add(why)
            log.warning("temper: image sandboxes' writable layers are not bounded on disk here (%s): their "
                        "disk_mb is not enforced", why)
        os.chown(mount, owner, owner)
        return Volume(mount, None)
    size = max(16 << 20, size_bytes)
    image = parent / f"{name}.img"
    try:
        _sparse_copy(_template(state, size), image)
        _mount_loop(image, mount)
        os.chown(mount, owner, owner)
        os.chmod(mount, 0o700)
    except BaseException:
        with contextlib.suppress(OSError):
            _libc.umount2(str(mount).encode(), _MNT_DETACH)
        image.unlink(missing_ok=True)
        raise
    return Volume(mount, image)


def detach(vol: Volume) -> None:
    if vol.image is not None:
        _libc.umount2(str(vol.mount).encode(), _MNT_DETACH)  # the loop device frees itself (autoclear)
        vol.image.unlink(missing_ok=True)
    shutil.rmtree(vol.mount, ignore_errors=True)
    drop_owner(vol.mount)


def unavailable() -> str:
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("mkfs.ext4"):
        return "mkfs.ext4 not found"
    if not os.path.exists("/dev/loop-control"):
        return "no loop devices"
    return ""


def _template(state: Path, size: int) -> Path:
    """An empty ext4 filesystem of `size` bytes, formatted once (no journal: the layer dies with its sandbox).
    One inode per 8 KiB (mke2fs gives one per 16 KiB from 512 MiB up): a package tree of small files
    (site-packages, node_modules) runs out of inodes long before its bytes fill the layer; 3% of it is
    inode tables."""
    folder = state / "volumes" / f"ext4-{size}-i{BYTES_PER_INODE}"

    def make(tmp: Path) -> None:
        img = tmp / "fs.img"
        with open(img, "wb") as f:
            f.truncate(size)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-O", "^has_journal", "-E", "lazy_itable_init=1,nodiscard",
                        "-m", "0", "-i", str(BYTES_PER_INODE), "-I", "256", str(img)],
                       check=True, capture_output=True, timeout=120)

    return build_once(folder, f"the {size >> 20} MiB layer filesystem", make, lock=state / "locks" /
                      f"volume-{size}.lock") / "fs.img"


def _sparse_copy(src: Path, dest: Path) -> None:
    """Copy `src`'s data extents only (SEEK_DATA/SEEK_HOLE): a few MiB of a filesystem of any size."""
    with open(src, "rb") as fi, open(dest, "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        fo.truncate(size)
        pos = 0
        while pos < size:
            try:
                data = os.lseek(fi.fileno(), pos, os.SEEK_DATA)
            except OSError:  # ENXIO: no data past pos
                break
            hole = os.lseek(fi.fileno(), data, os.SEEK_HOLE)
            os.copy_file_range(fi.fileno(), fo.fileno(), hole - data, data, data)
            pos = hole


def _mount_loop(image: Path, mount: Path) -> None:
    ctl = os.open("/dev/loop-control", os.O_RDWR | os.O_CLOEXEC)
    backing = os.open(image, os.O_RDWR | os.O_CLOEXEC)
    try:
        for _ in range(8):  # another process may take the free device first
            n = fcntl.ioctl(ctl, _LOOP_CTL_GET_FREE)
            dev = f"/dev/loop{n}"
            lfd = os.open(dev, os.O_RDWR | os.O_CLOEXEC)
            try:
                cfg = _LoopConfig(fd=backing)
                cfg.info.flags = _LO_FLAGS_AUTOCLEAR
                fcntl.ioctl(lfd, _LOOP_CONFIGURE, cfg)
            except OSError:
                os.close(lfd)
                continue
            try:
                if _libc.mount(dev.encode(), str(mount).encode(), b"ext4", _MS_NOSUID | _MS_NODEV, None) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"mount {dev} on {mount}: {os.strerror(err)}")
            finally:
                os.close(lfd)  # autoclear: the device detaches when the mount goes
            return
        raise OSError("no free loop device")
    finally:
        os.close(backing)
        os.close(ctl)
