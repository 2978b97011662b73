"""Image archives made by hand, as `docker save` and `podman save --format oci-archive` write them."""

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path


def layer_tar(entries: list[tuple]) -> bytes:
    """entries: ("file", name, data[, mode, uid]) | ("dir", name[, mode]) | ("symlink", name, target) |
    ("hardlink", name, target) | ("chr", name)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for kind, name, *rest in entries:
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                data = rest[0] if isinstance(rest[0], bytes) else rest[0].encode()
                info.size, info.mode = len(data), rest[1] if len(rest) > 1 else 0o644
                info.uid = info.gid = rest[2] if len(rest) > 2 else 0
            elif kind == "dir":
                info.type, info.mode = tarfile.DIRTYPE, rest[0] if rest else 0o755
            elif kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, rest[0]
            elif kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, rest[0]
            elif kind == "chr":
                info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def docker_archive(path: Path, layers: list[bytes], env: list[str], workdir: str = "/app", user: str = "") -> Path:
    """A `docker save` archive: manifest.json, the config and one layer.tar per layer."""
    config = json.dumps({"config": {"Env": env, "WorkingDir": workdir, "User": user, "Cmd": ["bash"]},
                         "rootfs": {"type": "layers", "diff_ids": [sha(la) for la in layers]}}).encode()
    with tarfile.open(path, "w") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        names = []
        for la in layers:
            names.append(f"{sha(la)[7:]}/layer.tar")
            add(names[-1], la)
        add("config.json", config)
        entry = {"Config": "config.json", "RepoTags": ["t:latest"], "Layers": names}
        add("manifest.json", json.dumps([entry]).encode())
    return path


def oci_archive(path: Path, layers: list[bytes], env: list[str], gzip_layers: bool = True) -> Path:
    """An OCI image layout in a tar: index.json -> manifest -> config and layer blobs (gzip-compressed)."""
    blobs: dict[str, bytes] = {}

    def blob(data: bytes) -> str:
        blobs[sha(data)] = data
        return sha(data)

    stored = [gzip.compress(la, mtime=0) if gzip_layers else la for la in layers]
    config = json.dumps({"config": {"Env": env, "WorkingDir": "/srv"},
                         "rootfs": {"type": "layers", "diff_ids": [sha(la) for la in layers]}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "config": {"digest": blob(config), "size": len(config)},
                           "layers": [{"digest": blob(s), "size": len(s), "mediaType":
                                       "application/vnd.oci.image.layer.v1.tar" + ("+gzip" if gzip_layers else "")}
                                      for s in stored]}).encode()
    index = json.dumps({"schemaVersion": 2, "manifests": [{"digest": blob(manifest), "size": len(manifest)}]})
    with tarfile.open(path, "w") as tar:
        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        add("oci-layout", b'{"imageLayoutVersion": "1.0.0"}')
        add("index.json", index.encode())
        for digest, data in blobs.items():
            add(f"blobs/sha256/{digest[7:]}", data)
    return path
