"""Image mode: the sandbox's root filesystem is an image's layers under a writable layer on disk.

The supervisor keeps the outer view (`/.temper/...`): it mounts the overlay at ROOT with /proc, /dev and a
/dev/shm on the writable layer's volume inside, and serves file requests there. Commands run in a mount
namespace of their own whose root is that overlay (`enter`, called by the spawner), so they never see the
layers, the writable layer's folder or the supervisor's files. ROOT is a shared mount and the commands' copy a
slave of it: a folder the supervisor seals later (a read-only /tests) is read-only for them too. A reset kills
every process (the supervisor's), unmounts, empties the writable layer and mounts it again.
"""

import errno
import os
import stat

import fsops
import native

ROOT = "/.temper/root"
HOSTS = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\tsandbox\n"


class ImageFolders(fsops.Folders):
    """fsops.Folders' confined file access (no link followed, nothing beyond ROOT), over the whole image."""

    def __init__(self, spec: dict):
        super().__init__({"mode": "mount", "rw_root": spec["rw_root"], "disk_bytes": spec["disk_bytes"],
                          "views": [], "tmp": "/tmp"})
        self.layers: list[str] = spec["layers"]  # in-sandbox folders, lowest first
        self.volumes: list[dict] = spec.get("volumes", [])  # scratch mounts: a folder, or a tmpfs of `size`
        self.dns: str | None = spec.get("dns")  # egress: the forwarder /etc/resolv.conf names
        self.workdir: str = spec.get("workdir", "/")
        self.overlay = True

    def build(self) -> None:
        upper, work = f"{self.rw_root}/upper", f"{self.rw_root}/work"
        for d in (upper, work):
            os.makedirs(d, mode=0o755, exist_ok=True)
        native.mount("overlay", ROOT, "overlay", 0,
                     f"lowerdir={':'.join(reversed(self.layers))},upperdir={upper},workdir={work},userxattr")
        self.mounted.append(ROOT)
        native.mount("none", ROOT, None, native.MS_SHARED)  # what is mounted below shows in the commands' view
        for name, mode in (("proc", 0o555), ("dev", 0o755), ("tmp", 0o1777), ("etc", 0o755)):
            _real_dir(name, mode)  # the image's own, never a link it planted (mount would follow it)
        native.mount("proc", f"{ROOT}/proc", "proc", native.MS_NOSUID | native.MS_NODEV)
        native.mount(f"{ROOT}/proc/sys", f"{ROOT}/proc/sys", None, native.MS_BIND)  # sysctls read-only, as a
        native.mount("none", f"{ROOT}/proc/sys", None, fsops._REMOUNT_BIND | native.MS_RDONLY)  # runtime has it
        native.mount("/dev", f"{ROOT}/dev", None, native.MS_BIND | native.MS_REC)
        shm = f"{self.rw_root}/shm"  # on the writable layer's volume: disk_mb bounds it with the rest, on disk
        os.makedirs(shm, mode=0o1777, exist_ok=True)
        os.chmod(shm, 0o1777)
        native.mount(shm, f"{ROOT}/dev/shm", None, native.MS_BIND)
        self.mounted += [f"{ROOT}/proc", f"{ROOT}/proc/sys", f"{ROOT}/dev", f"{ROOT}/dev/shm"]
        if self.workdir != "/":  # as a container runtime does, made where the image lacks it (buildah's WORKDIR
            os.close(fsops._open_dirs(ROOT, self.workdir.lstrip("/"), self.workdir))  # makes it only for a RUN)
        for vol in self.volumes:  # made (no link followed) before any command runs; sized ones on a tmpfs
            os.close(fsops._open_dirs(ROOT, vol["dest"].lstrip("/"), vol["dest"]))
            if vol.get("size"):
                native.mount("tmpfs", ROOT + vol["dest"], "tmpfs", native.MS_NOSUID | native.MS_NODEV,
                             f"size={vol['size']},mode=0755")
                self.mounted.append(ROOT + vol["dest"])
        try:
            text = self.read("/etc/hosts", 1 << 16).decode(errors="replace")
        except OSError:  # missing (or a link, left alone)
            text = ""
        if "localhost" not in text:  # as a container runtime does: localhost resolves
            try:  # noqa: SIM105 - contextlib would cost start-up time here
                self.write("/etc/hosts", HOSTS.encode(), 0o644)
            except OSError:
                pass
        if self.dns:  # the network's own resolver (a link there, e.g. to systemd's, is replaced: never followed)
            try:  # noqa: SIM105 - contextlib would cost start-up time here
                os.unlink(f"{ROOT}/etc/resolv.conf")
            except (FileNotFoundError, IsADirectoryError):
                pass
            self.write("/etc/resolv.conf", f"nameserver {self.dns}\n".encode(), 0o644)

    def reset(self, template: str | None, new_lower: bool) -> None:
        self.sealed.clear()
        for path in reversed(self.mounted):
            native.umount(path)
        self.mounted.clear()
        for d in (f"{self.rw_root}/upper", f"{self.rw_root}/work", f"{self.rw_root}/shm"):
            if os.path.isdir(d):
                fsops._empty(d)
        self.build()

    def disk_full(self) -> bool:
        st = os.statvfs(f"{self.rw_root}")
        return st.f_bavail * st.f_frsize < 64 * 1024 and st.f_blocks > 0

    def _root_of(self, path: str, write: bool) -> tuple[str, str]:
        if not path.startswith("/"):
            raise PermissionError(errno.EACCES, "not an absolute path", path)
        return ROOT, path.lstrip("/") or "."

    def copy_in(self, src: str, dest: str, read_only: bool = False) -> None:
        """fsops.Folders.copy_in over the image, every step through descriptors: the sandbox's processes
        keep running here (root among them), and a link they swap in meanwhile is never followed."""
        if read_only or dest in self.sealed:
            self._unseal(dest)
        dfd = fsops._open_dirs(ROOT, dest.lstrip("/"), dest)
        try:
            if read_only:
                _empty_at(dfd)
            fsops._copy_into(src, dfd, dest)
        finally:
            os.close(dfd)
        if read_only:
            self._seal(dest)

    def _seal(self, dest: str) -> None:
        """A read-only bind mount of the folder on itself, made through its descriptor (a link swapped in
        meanwhile is never followed); root in the sandbox has no CAP_SYS_ADMIN to undo it."""
        dfd = fsops._open_dirs(ROOT, dest.lstrip("/"), dest)
        try:
            native.bind_read_only(dfd)
        finally:
            os.close(dfd)
        self.sealed.add(dest)

    def _unseal(self, dest: str) -> None:
        if dest in self.sealed:
            native.umount_nofollow(ROOT + dest)
        self.sealed.discard(dest)


def _empty_at(dfd: int) -> None:
    """Remove everything in the folder `dfd`, following no link."""
    for entry in os.scandir(dfd):
        if entry.is_dir(follow_symlinks=False):
            sub = native.open_beneath(dfd, entry.name, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW)
            try:
                _empty_at(sub)
            finally:
                os.close(sub)
            os.rmdir(entry.name, dir_fd=dfd)
        else:
            os.unlink(entry.name, dir_fd=dfd)


def _real_dir(name: str, mode: int) -> None:
    """ROOT/name as a real folder: made if missing; a link or a file there is an image this cannot run."""
    path = f"{ROOT}/{name}"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        os.mkdir(path, mode)
        os.chmod(path, mode)
        return
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(errno.ENOTDIR, "the image has no folder here (a link or a file)", f"/{name}")


def enter() -> None:
    """Move this process (the spawner) into the image: a mount namespace of its own, a slave of the
    supervisor's, whose root is the overlay; the outer view is gone from it."""
    native.unshare(native.CLONE_NEWNS)
    native.mount("none", "/", None, native.MS_SLAVE | native.MS_REC)
    os.chdir(ROOT)
    native.pivot_root(".", ".")  # the old root is stacked under the new one...
    native.umount(".")  # ...and detached here
    os.chdir("/")
