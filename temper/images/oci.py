"""Reading an image as a build tool saves it: an OCI image layout (`podman save --format oci-dir`, an
OCI archive unpacked) or a Docker archive (`docker save`, unpacked). Either gives the image's
configuration and its layers in order, each with the digest of its uncompressed tar (`diff_id`)."""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.errors import TemperError


class ImageFormatError(TemperError):
    pass


@dataclass(frozen=True)
class LayerRef:
    path: Path  # the blob: a tar, maybe gzip-compressed
    diff_id: str  # sha256:<hex> of the uncompressed tar
    blob_digest: str | None  # sha256:<hex> of the blob as stored (None where the format names none)


@dataclass
class SavedImage:
    layers: list[LayerRef]
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    user: str = ""
    cmd: list[str] = field(default_factory=list)
    entrypoint: list[str] = field(default_factory=list)

    @classmethod
    def from_config(cls, config: dict[str, Any], blobs: list[tuple[Path, str | None]], where: str) -> "SavedImage":
        diff_ids = (config.get("rootfs") or {}).get("diff_ids") or []
        if len(diff_ids) != len(blobs):
            raise ImageFormatError(f"{where}: {len(blobs)} layers but {len(diff_ids)} diff_ids in its config")
        c = config.get("config") or {}
        env = dict(e.split("=", 1) if "=" in e else (e, "") for e in c.get("Env") or [])
        return cls([LayerRef(p, d, b) for (p, b), d in zip(blobs, diff_ids, strict=True)], env,
                   c.get("WorkingDir") or "/", c.get("User") or "", list(c.get("Cmd") or []),
                   list(c.get("Entrypoint") or []))


def _json(path: Path, where: str) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ImageFormatError(f"{where}: {path.name} is unreadable ({exc})") from None


def _blob(root: Path, digest: str, where: str) -> Path:
    algo, _, hexd = digest.partition(":")
    path = root / "blobs" / algo / hexd
    if algo != "sha256" or not hexd.isalnum() or not path.is_file():
        raise ImageFormatError(f"{where}: blob {digest} is missing")
    return path


def read_saved(root: Path, where: str) -> SavedImage:
    """The single image saved in folder `root` (OCI layout or Docker archive)."""
    if (root / "index.json").is_file():
        index = _json(root / "index.json", where)
        manifests = index.get("manifests") or []
        if len(manifests) != 1:
            raise ImageFormatError(f"{where}: {len(manifests)} images in one archive; temper reads one")
        manifest = json.loads(_blob(root, manifests[0]["digest"], where).read_text())
        if "manifests" in manifest:  # an index of platforms: the one for this machine is not chosen for you
            raise ImageFormatError(f"{where}: a multi-platform index; save one platform's image")
        config = json.loads(_blob(root, manifest["config"]["digest"], where).read_text())
        blobs = [(_blob(root, layer["digest"], where), layer["digest"]) for layer in manifest.get("layers") or []]
        return SavedImage.from_config(config, blobs, where)
    if (root / "manifest.json").is_file():
        entries = _json(root / "manifest.json", where)
        if not isinstance(entries, list) or len(entries) != 1:
            raise ImageFormatError(f"{where}: {len(entries)} images in one archive; temper reads one")
        entry = entries[0]
        config = _json(root / entry["Config"], where)
        blobs: list[tuple[Path, str | None]] = []
        for rel in entry.get("Layers") or []:
            path = (root / rel).resolve()
            if not path.is_relative_to(root.resolve()) or not path.is_file():
                raise ImageFormatError(f"{where}: layer {rel} is missing")
            blobs.append((path, None))
        return SavedImage.from_config(config, blobs, where)
    raise ImageFormatError(f"{where}: neither an OCI image layout (index.json) nor a Docker archive (manifest.json)")
