"""Staged copies of template folders, shared by every sandbox that uses them.

A sandbox sees a template through an overlay, whose lower files keep their owner: a template
owned by root would be read-only to the sandbox's uid. So each template is copied once (per
content signature) into the state folder, owned by `SandboxConfig.uid` and readable by all,
and bound read-only into sandboxes. Each sandbox runs as a uid of its own (uids.py), never
chowned for: Landlock-mode sandboxes copy the template (their copies are theirs), and a bwrap
sandbox binds an idmapped view in which `uid` reads as its own (idmap.py). The user's folder
is never written.
"""

import hashlib
import os
import shutil
from pathlib import Path

from temper.firsttime import build_once
from temper.sandbox.errors import SandboxError


def signature(src: Path) -> str:
    """A digest of the tree's names, sizes, modes and mtimes: a changed template stages anew."""
    h = hashlib.sha256(str(src.resolve()).encode())
    for root, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files) + dirs:
            st = os.lstat(os.path.join(root, name))
            h.update(f"{os.path.relpath(os.path.join(root, name), src)}\0{st.st_size}\0{st.st_mode}\0"
                     f"{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:24]


def stage(src: Path, templates_dir: Path, uid: int | None) -> str:
    """Stage `src` under `templates_dir` (idempotent, safe across processes and against kills); return its key.

    Copied into a `.tmp-*` folder under an owner lock (in `locks/` beside the templates, which sandboxes
    see) and renamed into place: a staged template exists only complete (temper/firsttime.py)."""
    if not src.is_dir():
        raise SandboxError(f"{src}: template folder not found")
    key = signature(src)

    def copy(tmp: Path) -> None:
        tmp.rmdir()  # copytree makes it
        try:
            shutil.copytree(src, tmp, symlinks=True)
        except (OSError, shutil.Error) as exc:
            raise SandboxError(f"{src}: cannot copy template: {exc}") from None
        _own(tmp, uid)

    build_once(templates_dir / key, f"the staged template {src}", copy, marker=False,
               lock=templates_dir.parent / "locks" / f"template-{key}.lock")
    return key


def _own(root: Path, uid: int | None) -> None:
    for path, dirs, files in os.walk(root):
        for name in [*dirs, *files, ""]:
            p = os.path.join(path, name) if name else path
            st = os.lstat(p)
            if uid is not None and os.geteuid() == 0:
                os.lchown(p, uid, uid)
            if not os.path.islink(p):
                extra = 0o555 if os.path.isdir(p) else 0o444 | (0o111 if st.st_mode & 0o100 else 0)
                os.chmod(p, (st.st_mode & 0o7777 | extra) & ~0o6000)  # no setuid/setgid bits
