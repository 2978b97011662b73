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
        if new_lower:
            self.views[0]["lower"] = template
        if self.mode == "mount":
            for path in reversed(self.mounted):
                native.umount(path)
            self.mounted.clear()
        else:
            for entry in os.scandir(self.rw_root):
                _remove(entry.path)
        self.build()

    def _build_view(self, view: dict) -> None:
        lower, name = view.get("lower"), view["name"]
        if self.mode != "mount":
            target = view["dest"]
            _mkdir(target, 0o755)
            if lower:
                _copytree(lower, target)
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
        dfd = os.open(root, os.O_DIRECTORY | os.O_RDONLY)
        try:
            for part in [p for p in parent.split("/") if p]:
                try:  # noqa: SIM105 - contextlib would cost start-up time here
                    os.mkdir(part, 0o755, dir_fd=dfd)
                except FileExistsError:
                    pass
                if stat.S_ISLNK(os.lstat(part, dir_fd=dfd).st_mode):
                    raise OSError(errno.ELOOP, "symlinks are not followed", path)
                nfd = native.open_beneath(dfd, part, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW)
                os.close(dfd)
                dfd = nfd
            fd = native.open_beneath(dfd, name, W_FLAGS, mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)
        finally:
            os.close(dfd)

    def read(self, path: str, limit: int) -> bytes:
        root, rel = self._root_of(path, write=False)
        dfd = os.open(root, os.O_DIRECTORY | os.O_RDONLY)
        try:
            fd = native.open_beneath(dfd, rel, os.O_RDONLY | os.O_NOFOLLOW)
        finally:
            os.close(dfd)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise IsADirectoryError(errno.EISDIR, "not a regular file", path)
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

    def listdir(self, path: str, recursive: bool) -> list:
        root, rel = self._root_of(path, write=False)
        dfd = os.open(root, os.O_DIRECTORY | os.O_RDONLY)
        try:
            fd = native.open_beneath(dfd, rel, os.O_DIRECTORY | os.O_RDONLY)
        finally:
            os.close(dfd)
        out: list = []
        _walk(fd, "", recursive, out)
        return out


def _walk(fd: int, prefix: str, recursive: bool, out: list) -> None:
    try:
        for entry in sorted(os.scandir(fd), key=lambda e: e.name):
            st = entry.stat(follow_symlinks=False)
            kind = "dir" if stat.S_ISDIR(st.st_mode) else "symlink" if stat.S_ISLNK(st.st_mode) else "file"
            out.append({"path": prefix + entry.name, "type": kind, "size": st.st_size})
            if recursive and kind == "dir" and len(out) < 100_000:
                sub = os.open(entry.name, os.O_DIRECTORY | os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
                _walk(sub, prefix + entry.name + "/", recursive, out)
    finally:
        os.close(fd)


def _mkdir(path: str, mode: int) -> None:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, mode)


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        import shutil  # only the copying fallback needs it; imported late to keep start-up fast

        shutil.rmtree(path)
    else:
        os.unlink(path)


def _copytree(src: str, dest: str) -> None:
    import shutil

    shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
