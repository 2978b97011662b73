"""The sandbox's writable folders (workspace, scratch mounts, /tmp) and file access confined to them.

bwrap mode: every writable folder lives on one tmpfs of `disk_bytes` (so the size bounds all
writes), and a folder with a template is a kernel overlay on it: a reset unmounts and remounts
(~1 ms for any size) and can never touch the template. Where overlay is refused, and in
Landlock mode (no mount namespace), the template is copied instead.
"""

import errno
import os
import stat

import native

W_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
_REMOUNT_BIND = 32 | native.MS_BIND | native.MS_NOSUID | native.MS_NODEV  # MS_REMOUNT: a bind mount's own flags


class Folders:
    def __init__(self, spec: dict):
        self.mode: str = spec["mode"]  # "mount" (own mount namespace) or "copy"
        self.rw_root: str = spec["rw_root"]
        self.disk_bytes: int = spec["disk_bytes"]
        self.views: list = spec["views"]  # {"name", "dest", "lower"}
        self.tmp: str = spec["tmp"]
        self.hide: list[str] = spec.get("hide", [])
        self.readable: list[str] = spec.get("readable", [])
        self.overlay = self.mode == "mount"
        self.mounted: list[str] = []
        self.sealed: set[str] = set()  # views made read-only (`seal`) until the next reset or copy into them

    # -- build and reset ------------------------------------------------------------------
    def build(self) -> None:
        if self.mode == "mount":
            native.mount("tmpfs", self.rw_root, "tmpfs", native.MS_NOSUID | native.MS_NODEV,
                         f"size={self.disk_bytes},mode=0755")
            self.mounted.append(self.rw_root)
        _mkdir(self.tmp_dir(), 0o1777)
        for view in self.views:
            self._build_view(view)
        if self.mode == "mount":
            native.mount(self.tmp_dir(), self.tmp, None, native.MS_BIND)
            self.mounted.append(self.tmp)
            if os.path.isdir("/dev/shm"):  # bwrap's is on its /dev tmpfs: unbounded and never reset
                _mkdir(f"{self.rw_root}/.shm", 0o1777)
                native.mount(f"{self.rw_root}/.shm", "/dev/shm", None, native.MS_BIND)
                self.mounted.append("/dev/shm")
            for path in self.hide:  # templates of other tasks: out of sight once the overlays hold them
                native.mount("tmpfs", path, "tmpfs", native.MS_RDONLY, "size=4k,mode=0555")
                self.mounted.append(path)

    def reset(self, template: str | None, new_lower: bool) -> None:
        self.sealed.clear()  # every view is rebuilt writable
        if new_lower:
            self.views[0]["lower"] = template
        if self.mode == "mount":
            for path in reversed(self.mounted):
                native.umount(path)
            self.mounted.clear()
        else:
            _empty(self.rw_root)  # the sandbox's own modes (a sealed folder's a-w) never stop a reset
        self.build()

    def _build_view(self, view: dict) -> None:
        lower, name = view.get("lower"), view["name"]
        if self.mode != "mount":
            target = view["dest"]
            _mkdir(target, 0o755)
            if lower:
                _copytree(lower, target)
            return
        if view.get("size"):  # a scratch folder on a tmpfs of its own: what fills the rest cannot fill it
            native.mount("tmpfs", view["dest"], "tmpfs", native.MS_NOSUID | native.MS_NODEV,
                         f"size={view['size']},mode=0755")
            self.mounted.append(view["dest"])
            return
        upper, work = f"{self.rw_root}/{name}", f"{self.rw_root}/.{name}-work"
        _mkdir(upper, 0o755)
        if lower and self.overlay:
            _mkdir(work, 0o700)
            try:
                native.mount("overlay", view["dest"], "overlay", 0,
                             f"lowerdir={lower},upperdir={upper},workdir={work},userxattr")
                self.mounted.append(view["dest"])
                return
            except OSError:
                self.overlay = False  # kernel refuses overlay here: copy from now on
                os.rmdir(work)
        if lower:
            _copytree(lower, upper)
        native.mount(upper, view["dest"], None, native.MS_BIND)
        self.mounted.append(view["dest"])

    def tmp_dir(self) -> str:
        return f"{self.rw_root}/tmp" if self.mode == "mount" else self.tmp

    def disk_full(self) -> bool:
        st = os.statvfs(self.rw_root)
        return st.f_bavail * st.f_frsize < 64 * 1024 and st.f_blocks > 0

    # -- confined file access -------------------------------------------------------------
    def _root_of(self, path: str, write: bool) -> tuple[str, str]:
        roots = [v["dest"] for v in self.views] + [self.tmp] + ([] if write else self.readable)
        for root in sorted(roots, key=len, reverse=True):
            if path == root or path.startswith(root.rstrip("/") + "/"):
                return root, path[len(root):].lstrip("/") or "."
        raise PermissionError(errno.EACCES, "outside the sandbox's folders", path)

    def write(self, path: str, data: bytes, mode: int) -> None:
        root, rel = self._root_of(path, write=True)
        parent, name = os.path.split(rel)
        if not name or name in (".", ".."):
            raise IsADirectoryError(errno.EISDIR, "not a file path", path)
        dfd = _open_dirs(root, parent, path)
        try:
            fd = _open_regular(dfd, name, W_FLAGS, path, mode)
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
        finally:
            os.close(dfd)

    def copy_in(self, src: str, dest: str, read_only: bool = False) -> None:
        """Copy the host's folder `src` into `dest`, never following a link the sandbox planted there.
        read_only: `dest` must be a whole folder of the sandbox (a view); it is emptied of what the sandbox
        left there first and sealed after (`seal`)."""
        if read_only:
            if dest not in [v["dest"] for v in self.views]:
                raise PermissionError(errno.EACCES, "only a whole folder of the sandbox can be made read-only", dest)
            self._unseal(dest)
            _empty(dest)
        elif dest in self.sealed:
            self._unseal(dest)
        root, rel = self._root_of(dest, write=True)
        dfd = _open_dirs(root, "" if rel == "." else rel, dest)
        try:
            _copy_into(src, dfd, dest)
        finally:
            os.close(dfd)
        if read_only:
            self._seal(dest)

    def _seal(self, dest: str) -> None:
        """Read-only for every command: in mount mode the view is remounted read-only, which a command (no
        capabilities, seccomp-filtered) cannot undo; in copy mode only the mode bits say so (the same uid
        can change them back: docs/sandbox.md)."""
        if self.mode == "mount":
            native.mount("none", dest, None, _REMOUNT_BIND | native.MS_RDONLY)
        else:
            _chmod_tree(dest, 0o444, 0o555)
        self.sealed.add(dest)

    def _unseal(self, dest: str) -> None:
        if dest in self.sealed and self.mode == "mount":
            native.mount("none", dest, None, _REMOUNT_BIND)
        self.sealed.discard(dest)

    def read(self, path: str, limit: int) -> bytes:
        root, rel = self._root_of(path, write=False)
        dfd = _open_root(root)
        try:
            fd = _open_regular(dfd, rel, os.O_RDONLY | os.O_NOFOLLOW, path)
        finally:
            os.close(dfd)
        try:
            chunks, size = [], 0
            while size <= limit:
                chunk = os.read(fd, min(1 << 20, limit + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def listdir(self, path: str, recursive: bool) -> tuple[list, bool]:
        """The entries under `path` and whether the list was cut at LIST_BUDGET bytes of names."""
        root, rel = self._root_of(path, write=False)
        dfd = _open_root(root)
        try:
            fd = native.open_beneath(dfd, rel, os.O_DIRECTORY | os.O_RDONLY | os.O_NONBLOCK)
        finally:
            os.close(dfd)
        out: list = []
        budget = [LIST_BUDGET]
        _walk(fd, "", recursive, out, budget)
        return out, budget[0] < 0


# A listing's reply must fit the wire's header limit whatever the sandbox holds (70,000 long names
# would not): it is cut once the names reach this many bytes (each entry's JSON adds ~40).
LIST_BUDGET = 4 << 20
ENTRY_OVERHEAD = 48


def _walk(fd: int, prefix: str, recursive: bool, out: list, budget: list[int]) -> None:
    try:
        for entry in sorted(os.scandir(fd), key=lambda e: e.name):
            budget[0] -= len(prefix) + len(entry.name.encode(errors="surrogateescape")) + ENTRY_OVERHEAD
            if budget[0] < 0:
                return
            st = entry.stat(follow_symlinks=False)
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            out.append({"path": prefix + entry.name, "type": kind, "size": st.st_size})
            if recursive and kind == "dir":
                sub = os.open(entry.name, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
                _walk(sub, prefix + entry.name + "/", recursive, out, budget)
                if budget[0] < 0:
                    return
    finally:
        os.close(fd)


def _open_root(root: str) -> int:
    # O_NOFOLLOW: in Landlock mode a folder's host path could be swapped for a link by the sandbox uid
    return os.open(root, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)


def _open_dirs(root: str, rel: str, path: str) -> int:
    """A directory fd for `root/rel`, creating missing folders; a symlink anywhere below `root` is refused."""
    dfd = _open_root(root)
    try:
        for part in [p for p in rel.split("/") if p]:
            nfd = _subdir(dfd, part, path)
            os.close(dfd)
            dfd = nfd
    except BaseException:
        os.close(dfd)
        raise
    return dfd


def _subdir(dfd: int, name: str, path: str, mode: int = 0o755) -> int:
    """The folder `name` of `dfd`, made if missing; O_NOFOLLOW: a symlink there fails (ELOOP)."""
    try:  # noqa: SIM105 - contextlib would cost start-up time here
        os.mkdir(name, mode, dir_fd=dfd)
    except FileExistsError:
        pass
    try:
        return native.open_beneath(dfd, name, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:  # a symlink fails with ELOOP or (with O_DIRECTORY) ENOTDIR: say which it was
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and stat.S_ISLNK(os.lstat(name, dir_fd=dfd).st_mode):
            raise OSError(errno.ELOOP, "symlinks are not followed", path) from None
        raise OSError(exc.errno, exc.strerror, path) from None


def _open_regular(dfd: int, rel: str, flags: int, path: str, mode: int = 0o644) -> int:
    """Open a regular file only: O_NONBLOCK so that a fifo the sandbox planted cannot block us
    (ENXIO without a reader), then a type check so that neither a fifo nor a socket is used."""
    try:
        fd = native.open_beneath(dfd, rel, flags | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno in (errno.ENXIO, errno.EOPNOTSUPP):  # a fifo without a reader, a unix socket
            raise OSError(errno.EINVAL, "not a regular file", path) from None
        raise OSError(exc.errno, "symlinks are not followed" if exc.errno == errno.ELOOP
                      else exc.strerror, path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise (IsADirectoryError(errno.EISDIR, "a directory, not a file", path) if stat.S_ISDIR(st.st_mode)
                   else OSError(errno.EINVAL, "not a regular file", path))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy_into(src: str, dfd: int, dest: str) -> None:
    """Copy the trusted folder `src` into the directory `dfd`, creating and opening every target
    relative to its parent's fd with O_NOFOLLOW: a link the sandbox planted is refused, never followed."""
    for entry in os.scandir(src):
        st = entry.stat(follow_symlinks=False)
        where, perm = f"{dest}/{entry.name}", stat.S_IMODE(st.st_mode)
        if stat.S_ISDIR(st.st_mode):
            sub = _subdir(dfd, entry.name, where, perm | 0o700)
            try:
                _copy_into(entry.path, sub, where)
                os.fchmod(sub, perm)  # last, as shutil's copystat did: a read-only folder is filled first
            finally:
                os.close(sub)
        elif stat.S_ISLNK(st.st_mode):  # the template's own link: recreated as a link, not followed
            try:
                if stat.S_ISDIR(os.lstat(entry.name, dir_fd=dfd).st_mode):
                    raise IsADirectoryError(errno.EISDIR, "a directory is in the way", where)
                os.unlink(entry.name, dir_fd=dfd)
            except FileNotFoundError:
                pass
            os.symlink(os.readlink(entry.path), entry.name, dir_fd=dfd)
        elif stat.S_ISREG(st.st_mode):
            fd = _open_regular(dfd, entry.name, W_FLAGS, where, perm)
            try:
                os.fchmod(fd, perm)
                with open(entry.path, "rb") as f:
                    while chunk := f.read(1 << 20):
                        _write_all(fd, chunk)
                os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))  # as shutil.copy2 did: make-style tasks
            finally:
                os.close(fd)


def _mkdir(path: str, mode: int) -> None:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)


def _empty(path: str) -> None:
    """Remove everything under `path`, following no link, whatever modes the sandbox left on it."""
    os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) | stat.S_IRWXU)
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            _empty(entry.path)
            os.rmdir(entry.path)
        else:
            os.unlink(entry.path)


def _chmod_tree(path: str, file_mode: int, dir_mode: int) -> None:
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            _chmod_tree(entry.path, file_mode, dir_mode)
        elif entry.is_file(follow_symlinks=False):
            os.chmod(entry.path, file_mode)
    os.chmod(path, dir_mode)


def _copytree(src: str, dest: str) -> None:
    dfd = _open_root(dest)
    try:
        _copy_into(src, dfd, dest)
    finally:
        os.close(dfd)
