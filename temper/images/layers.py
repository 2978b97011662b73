"""One image layer unpacked into a folder that kernel overlayfs can stack as a read-only lower layer.

Layers come from strangers' images, so the unpacker trusts no entry: names are cleaned (no `..`, no
absolute path), every parent folder is resolved inside the layer's own folder (a symlink, even an absolute
one, is followed as the container would, never onto the host), an entry never writes through an existing
link (it replaces it), and device nodes are dropped (sandboxes mount their own /dev). Owners shift by
`uid_base` (root inside is uid_base outside: no one), setuid bits stay. OCI whiteouts become overlay's:
`.wh.NAME` a 0/0 character device, `.wh..wh..opq` the opaque attribute on its folder.
"""

import errno
import hashlib
import os
import posixpath
import shutil
import stat
import tarfile
from pathlib import Path
from typing import BinaryIO

from temper.errors import TemperError

WHITEOUT, OPAQUE = ".wh.", ".wh..wh..opq"
ID_RANGE = 65536  # uids and gids inside an image sandbox: 0..65535
_MAX_LINKS = 40


class LayerError(TemperError):
    pass


class HashingReader:
    """A file wrapper that hashes what is read through it (the blob's digest, checked at the end)."""

    def __init__(self, f: BinaryIO):
        self.f, self.h, self.size = f, hashlib.sha256(), 0

    def read(self, n: int = -1) -> bytes:
        data = self.f.read(n)
        self.h.update(data)
        self.size += len(data)
        return data

    def drain(self) -> str:
        while self.read(1 << 20):
            pass
        return "sha256:" + self.h.hexdigest()


def clean(name: str) -> str | None:
    """The entry's path relative to the layer's root, or None for the root itself; `..` is refused."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise LayerError(f"entry {name!r} climbs out of the layer ('..')")
    return "/".join(parts) or None


def resolve(root: Path, rel: str) -> str:
    """`rel` (a folder) with every symlink in it followed inside `root`, as if `root` were `/`."""
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    out: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if out:
                out.pop()
            continue
        cand = root.joinpath(*out, part)
        if cand.is_symlink():
            hops += 1
            if hops > _MAX_LINKS:
                raise LayerError(f"{rel}: more than {_MAX_LINKS} symlinks deep")
            target = os.readlink(cand)
            if target.startswith("/"):
                out = []
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
        else:
            out.append(part)
    return "/".join(out)


def _set_opaque(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    os.setxattr(folder, "user.overlay.opaque", b"y")  # what an overlay mounted with userxattr reads
    try:
        os.setxattr(folder, "trusted.overlay.opaque", b"y")  # and one mounted by the host's root
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP):
            raise


def _replace(path: Path, keep_dir: bool) -> None:
    """Make room for a new entry at `path`: an existing file or link goes (never written through)."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        if keep_dir:
            return
        shutil.rmtree(path)
    else:
        path.unlink()


def _shift(ident: int, base: int) -> int:
    return base + ident if 0 <= ident < ID_RANGE else base + ID_RANGE - 2  # out of range: nobody (65534)


def unpack(blob: BinaryIO, dest: Path, uid_base: int) -> int:
    """Unpack the layer tar (plain or gzip) read from `blob` into `dest`; returns the entries unpacked."""
    dest.mkdir(parents=True, exist_ok=True)
    placed: dict[str, str] = {}  # entry name -> where it went (hard links name entries)
    count = 0
    with tarfile.open(fileobj=blob, mode="r|*") as tar:
        for m in tar:
            rel = clean(m.name)
            if rel is None:
                continue
            parent, base = posixpath.split(rel)
            parent = resolve(dest, parent)
            if base == OPAQUE:
                _set_opaque(dest / parent)
                continue
            if base.startswith(WHITEOUT):
                target = dest / parent / base[len(WHITEOUT):]
                target.parent.mkdir(parents=True, exist_ok=True)
                _replace(target, keep_dir=False)
                os.mknod(target, stat.S_IFCHR | 0o000, os.makedev(0, 0))
                os.chown(target, uid_base, uid_base, follow_symlinks=False)
                continue
            if m.ischr() or m.isblk():
                continue
            m.name = posixpath.join(parent, base)
            if m.islnk():
                link = clean(m.linkname)
                if link is None or link not in placed:
                    raise LayerError(f"hard link {rel} -> {m.linkname}: its target is not an earlier entry")
                m.linkname = placed[link]
            (dest / parent).mkdir(parents=True, exist_ok=True)
            _replace(dest / m.name, keep_dir=m.isdir())
            m.uid, m.gid = _shift(m.uid, uid_base), _shift(m.gid, uid_base)
            m.uname = m.gname = ""
            tar.extract(m, dest, numeric_owner=True, filter="fully_trusted")
            placed[rel] = m.name
            count += 1
    return count


def disk_bytes(folder: Path) -> int:
    """Blocks in use under `folder` (a file hard-linked twice counts once)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in (*dirnames, *filenames):
            st = os.lstat(os.path.join(dirpath, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total
