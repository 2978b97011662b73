"""The image store: task images built, pulled or loaded once, each layer unpacked once and shared.

    <store>/layers/<hex>/      one unpacked layer (by the digest of its tar), a read-only overlay lower
    <store>/images/<key>.json  one image: its layers (lowest first), ENV, WORKDIR, USER, where it came from
    <store>/bases/<key>.tar    Debian root filesystems built by mmdebstrap (bases.py)
    <store>/podman/            the build tool's own storage and cache

An image built from a Dockerfile is keyed by content: the Dockerfile, every file of its build context and
the bases its FROM names resolved to; an unchanged task is never rebuilt. Every first-time step runs under
an owner lock and lands by one rename (temper.firsttime), so an interrupted build leaves nothing half-made.
"""

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from temper import firsttime
from temper.errors import TemperError
from temper.images import bases, dockerfile, layers, oci
from temper.images.builder import ImageBuildError, Tool, choose
from temper.images.config import BaseImage, ImagesConfig

log = logging.getLogger("temper.images")
_said: set[tuple[str, str]] = set()  # (task, FROM name) substitutions already warned about


class ImageNotFound(TemperError):
    pass


@dataclass
class Image:
    key: str
    name: str  # the task folder's name, the pulled reference or the archive's file name
    source: str  # dockerfile | pull | archive
    layers: list[str]  # diff_ids, lowest first
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    cmd: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)
    substitutions: dict[str, str] = field(default_factory=dict)  # FROM name -> the base used instead
    created: float = 0.0
    build_s: float | None = None


def _hex(diff_id: str) -> str:
    algo, _, hexd = diff_id.partition(":")
    if algo != "sha256" or not re.fullmatch(r"[0-9a-f]{64}", hexd):
        raise oci.ImageFormatError(f"layer digest {diff_id!r} is not sha256:<64 hex>")
    return hexd


def context_digest(folder: Path) -> str:
    """Every file of a build context: path, type, mode and content (links by their target, never followed)."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            h.update(f"{os.path.relpath(path, folder)}\0{st.st_mode:o}\0".encode())
            if stat.S_ISLNK(st.st_mode):
                h.update(os.readlink(path).encode())
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
    return h.hexdigest()


class ImageStore:
    def __init__(self, cfg: ImagesConfig):
        self.cfg, self.root = cfg, cfg.store
        self._tool: Tool | None = None
        self.built: list[str] = []  # keys of the images this store built or added (not found cached)

    @property
    def tool(self) -> Tool:
        if self._tool is None:
            self._tool = choose(self.cfg)
        return self._tool

    def _dir(self, name: str) -> Path:
        d = self.root / name
        if not d.is_dir():
            d.mkdir(parents=True, exist_ok=True, mode=0o755)
            for p in (self.root, d):  # the layers are read by sandboxes' uids: every folder on the way traversable
                p.chmod(0o755)
        return d

    def layer_dir(self, diff_id: str) -> Path:
        return self.root / "layers" / _hex(diff_id)

    def layer_dirs(self, image: Image) -> list[Path]:
        return [self.layer_dir(d) for d in image.layers]

    # -- reading the store -------------------------------------------------------------------
    def get(self, key: str) -> Image | None:
        path = self.root / "images" / f"{key}.json"
        try:
            image = Image(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        return image if all(d.is_dir() for d in self.layer_dirs(image)) else None

    def images(self) -> list[Image]:
        folder = self.root / "images"
        found = [self.get(p.stem) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
        return sorted((i for i in found if i is not None), key=lambda i: i.created)

    def find(self, ref: str) -> list[Image]:
        """Images whose key starts with `ref` or whose name is `ref`."""
        return [i for i in self.images() if i.key.startswith(ref) or i.name == ref]

    # -- adding images -----------------------------------------------------------------------
    def build_task(self, folder: Path | str, timeout_s: float | None = None,
                   on_line: Callable[[str], None] | None = None) -> Image:
        """The image of a task folder's environment/Dockerfile (context: environment/), built once."""
        folder = Path(folder)
        where = f"task folder {folder.name}"
        env_dir = folder / "environment"
        df = env_dir / "Dockerfile"
        instructions = dockerfile.parse(df, where)
        subs = {name: (ins, hit) for ins, name in dockerfile.base_images(instructions)
                if (hit := bases.resolve(name, self.cfg)) is not None}
        h = hashlib.sha256(df.read_bytes() + context_digest(env_dir).encode())
        for name, (_, (_, base)) in sorted(subs.items()):
            h.update(f"{name}\0{bases.base_key(base, self.cfg)}".encode())
        key = h.hexdigest()[:24]
        image = self.get(key)
        if image is not None:
            return image
        with firsttime.OwnerLock(self._dir("locks") / f"image-{key}.lock", f"the image of {where}"):
            if (image := self.get(key)) is not None:  # built by the process we waited for
                return image
            lines = df.read_text().splitlines(keepends=True)
            for name, (ins, (pattern, base)) in subs.items():
                local = self.base(base)
                if (where, name) not in _said:
                    _said.add((where, name))
                    log.warning("temper: %s: FROM %s is built as %s (%s, base-image map entry %r)",
                                where, name, local, bases.describe(base), pattern)
                lines[ins.line - 1:ins.end] = [dockerfile.rewrite_from(ins, local)] + ["\n"] * (ins.end - ins.line)
            with tempfile.TemporaryDirectory(prefix="temper-build-", dir=self._dir("tmp")) as tmp:
                rewritten = Path(tmp) / "Dockerfile"
                rewritten.write_text("".join(lines))
                ref = f"localhost/temper-task/{_slug(folder.name)}:{key}"
                t0 = time.monotonic()
                try:
                    self.tool.build(rewritten, env_dir, ref, instructions, where,
                                    timeout_s or self.cfg.build_timeout_s, on_line)
                except ImageBuildError as exc:
                    self._log_build(key, folder, "failed", time.monotonic() - t0, str(exc))
                    raise
                build_s = time.monotonic() - t0
                self._log_build(key, folder, "built", build_s, "")
                self.tool.save(ref, Path(tmp) / "saved")
                saved = oci.read_saved(Path(tmp) / "saved", where)
                return self._record(saved, key, folder.name, "dockerfile",
                                    {n: bases.describe(b) for n, (_, (_, b)) in subs.items()}, build_s)

    def _log_build(self, key: str, folder: Path, outcome: str, seconds: float, error: str) -> None:
        """builds.jsonl in the store: every build, who ran it, what it built from and how it ended."""
        entry = {"time": time.time(), "key": key, "task": str(folder), "tool": self.tool.name, "outcome": outcome,
                 "seconds": round(seconds, 2), "uid": os.getuid(), "pid": os.getpid(), "error": error}
        with open(self._dir(".") / "builds.jsonl", "a") as f:
            f.write(json.dumps(entry) + "\n")

    def load(self, archive: Path) -> Image:
        """An image from a `docker save` / `podman save` archive (Docker or OCI format, plain or gzip)."""
        where = f"image archive {archive}"
        if not archive.is_file():
            raise ImageNotFound(f"{where}: no such file")
        with tempfile.TemporaryDirectory(prefix="temper-load-", dir=self._dir("tmp")) as tmp:
            try:
                with tarfile.open(archive) as tar:
                    tar.extractall(tmp, filter="data")
            except (tarfile.TarError, OSError) as exc:
                why = str(exc).strip().splitlines()[-1].lstrip("- ")  # tarfile lists every method it tried
                raise oci.ImageFormatError(f"{where}: not a readable tar archive ({why})") from None
            saved = oci.read_saved(Path(tmp), where)
            key = hashlib.sha256(",".join(layer.diff_id for layer in saved.layers).encode()
                                 + json.dumps(asdict(saved)["env"], sort_keys=True).encode()).hexdigest()[:24]
            return self.get(key) or self._record(saved, key, archive.name, "archive", {}, None)

    def pull(self, ref: str) -> Image:
        """An image by name from a registry the build tool reaches."""
        self.tool.run("pull", ref, timeout=self.cfg.build_timeout_s, what=f"pulling {ref}")
        with tempfile.TemporaryDirectory(prefix="temper-pull-", dir=self._dir("tmp")) as tmp:
            self.tool.save(ref, Path(tmp) / "saved")
            saved = oci.read_saved(Path(tmp) / "saved", f"image {ref}")
            key = hashlib.sha256(ref.encode() + ",".join(la.diff_id for la in saved.layers).encode()).hexdigest()[:24]
            return self.get(key) or self._record(saved, key, ref, "pull", {}, None)

    def base_for(self, ref: str) -> tuple[str, BaseImage]:
        """The base a FROM name resolves to through the map, built and imported if it is not yet."""
        hit = bases.resolve(ref, self.cfg)
        if hit is None:
            raise ImageNotFound(f"image {ref}: no entry of the base-image map matches it (images.bases)")
        return self.base(hit[1]), hit[1]

    def base(self, base: BaseImage) -> str:
        """The local name of a base image in the build tool, built by mmdebstrap and imported once."""
        ref = bases.local_name(base, self.cfg)
        if self.tool.has_image(ref):
            return ref
        key = bases.base_key(base, self.cfg)
        with firsttime.OwnerLock(self._dir("locks") / f"base-{key}.lock", f"base image {bases.describe(base)}"):
            if self.tool.has_image(ref):
                return ref
            tarball = self._dir("bases") / f"{key}.tar"
            if not tarball.is_file():
                log.info("temper: building base image %s with mmdebstrap from %s", bases.describe(base),
                         self.cfg.mirror)
                bases.build_rootfs(base, self.cfg, tarball, self.cfg.build_timeout_s)
            self.tool.import_rootfs(tarball, ref, {"PATH": bases.BASE_PATH, "LANG": "C.UTF-8"})
        return ref

    def _record(self, saved: oci.SavedImage, key: str, name: str, source: str, subs: dict[str, str],
                build_s: float | None) -> Image:
        for layer in saved.layers:
            self._unpack(layer, name)
        image = Image(key, name, source, [la.diff_id for la in saved.layers], saved.env, saved.workdir,
                      saved.user, saved.cmd, saved.entrypoint, subs, time.time(), build_s)
        path = self._dir("images") / f"{key}.json"
        tmp = path.with_suffix(f".json.{os.getpid()}")
        tmp.write_text(json.dumps(asdict(image), indent=1))
        os.replace(tmp, path)
        self.built.append(key)
        return image

    def _unpack(self, layer: oci.LayerRef, name: str) -> None:
        def build(tmp: Path) -> None:
            with open(layer.path, "rb") as f:
                reader = layers.HashingReader(f)
                layers.unpack(reader, tmp, self.cfg.uid_base)  # type: ignore[arg-type]
                digest = reader.drain()
            if layer.blob_digest is not None and digest != layer.blob_digest:
                raise oci.ImageFormatError(f"image {name}: layer {layer.blob_digest} reads as {digest}")
            os.chown(tmp, self.cfg.uid_base, self.cfg.uid_base)

        self._dir("layers")
        firsttime.build_once(self.layer_dir(layer.diff_id), f"layer {layer.diff_id[:19]} of {name}", build,
                             marker=False, lock=self._dir("locks") / f"layer-{_hex(layer.diff_id)}.lock")

    # -- removing ----------------------------------------------------------------------------
    def remove(self, ref: str) -> list[Image]:
        hits = self.find(ref)
        if not hits:
            raise ImageNotFound(f"image {ref}: no image has this key or name (temper image ls)")
        for image in hits:
            (self.root / "images" / f"{image.key}.json").unlink(missing_ok=True)
        return hits

    def prune(self) -> int:
        """Remove layers no image uses, base tarballs and the build tool's cache; returns bytes freed."""
        used = {_hex(d) for image in self.images() for d in image.layers}
        freed = 0
        folder = self.root / "layers"
        for d in sorted(folder.iterdir()) if folder.is_dir() else []:
            hexd = d.name.removeprefix(".tmp-").split("-")[0]  # .tmp-<hex>-*: a build's (or a dead one's) work
            if hexd not in used and not firsttime.is_held(self.root / "locks" / f"layer-{hexd}.lock"):
                freed += layers.disk_bytes(d)
                shutil.rmtree(d)
        for tarball in sorted((self.root / "bases").glob("*.tar")):
            freed += tarball.stat().st_size
            tarball.unlink()
        if (self.root / "podman").is_dir() and shutil.which("podman"):
            before = layers.disk_bytes(self.root / "podman")
            self.tool.run("system", "prune", "--all", "--force", what="pruning the build tool's storage")
            freed += max(0, before - layers.disk_bytes(self.root / "podman"))
        return freed

    def disk_use(self) -> dict[str, int]:
        """Bytes: each image's layers in all, the layer store once (shared layers counted once), the rest."""
        sizes = {d.name: layers.disk_bytes(d) for d in (self.root / "layers").iterdir()} \
            if (self.root / "layers").is_dir() else {}
        out = {f"image:{i.key}": sum(sizes.get(_hex(d), 0) for d in i.layers) for i in self.images()}
        out["layers"] = sum(sizes.values())
        for name in ("bases", "podman"):
            out[name] = layers.disk_bytes(self.root / name) if (self.root / name).is_dir() else 0
        return out


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip("-.") or "task"

