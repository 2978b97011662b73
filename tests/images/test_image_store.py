"""The image store: saved archives (Docker and OCI) loaded, each layer unpacked once and shared, removed and
pruned; malformed archives refused with one line naming the archive."""

import io
import json
import tarfile

import pytest
from image_helpers import docker_archive, layer_tar, oci_archive, sha

from temper.errors import TemperError
from temper.images import ImagesConfig, ImageStore

BASE_LAYER = layer_tar([("dir", "usr/bin"), ("file", "usr/bin/tool", "v1", 0o755), ("file", "etc/os-release", "ID=x")])
APP_LAYER = layer_tar([("dir", "app"), ("file", "app/main.py", "print('hi')"), ("file", "etc/.wh.os-release", "")])
OTHER_LAYER = layer_tar([("file", "srv/data.txt", "d" * 50_000)])


@pytest.fixture
def store(tmp_path):
    return ImageStore(ImagesConfig(store=tmp_path / "store"))


def test_a_docker_archive_loads_with_its_env_workdir_and_user(store, tmp_path):
    img = store.load(docker_archive(tmp_path / "a.tar", [BASE_LAYER, APP_LAYER], ["PATH=/opt/bin:/usr/bin", "A=1=2"],
                                    workdir="/app", user="app"))
    assert img.source == "archive" and img.layers == [sha(BASE_LAYER), sha(APP_LAYER)]
    assert img.env == {"PATH": "/opt/bin:/usr/bin", "A": "1=2"} and (img.workdir, img.user) == ("/app", "app")
    lower, upper = store.layer_dirs(img)
    assert (lower / "usr/bin/tool").read_text() == "v1" and (upper / "app/main.py").is_file()
    assert store.get(img.key) == img and store.find(img.key[:8]) == [img] and img.key in store.built


def test_an_oci_archive_with_gzip_layers_loads_and_a_shared_layer_is_unpacked_once(store, tmp_path):
    first = store.load(docker_archive(tmp_path / "a.tar", [BASE_LAYER, APP_LAYER], []))
    base_dir = store.layer_dirs(first)[0]
    mtime = base_dir.stat().st_mtime_ns
    second = store.load(oci_archive(tmp_path / "b.tar", [BASE_LAYER, OTHER_LAYER], ["X=1"]))
    assert second.workdir == "/srv" and second.env == {"X": "1"}
    assert store.layer_dirs(second)[0] == base_dir and base_dir.stat().st_mtime_ns == mtime  # not unpacked again
    use = store.disk_use()
    assert use["layers"] < use[f"image:{first.key}"] + use[f"image:{second.key}"]  # the base counted once
    assert store.load(tmp_path / "b.tar").key == second.key and len(store.images()) == 2  # loading again: cached


def test_rm_then_prune_frees_the_layers_no_image_uses(store, tmp_path):
    first = store.load(docker_archive(tmp_path / "a.tar", [BASE_LAYER, APP_LAYER], []))
    second = store.load(oci_archive(tmp_path / "b.tar", [BASE_LAYER, OTHER_LAYER], []))
    other_dir = store.layer_dirs(second)[1]
    assert [i.key for i in store.remove(second.key[:10])] == [second.key]
    freed = store.prune()
    assert freed >= 50_000 and not other_dir.exists()
    assert all(d.is_dir() for d in store.layer_dirs(first))  # still used
    with pytest.raises(TemperError, match="no image has this key or name"):
        store.remove("nope")


def test_a_layer_that_does_not_match_its_digest_is_refused(store, tmp_path):
    path = oci_archive(tmp_path / "b.tar", [BASE_LAYER], [], gzip_layers=False)
    bad = tmp_path / "bad.tar"
    with tarfile.open(path) as src, tarfile.open(bad, "w") as dst:  # same names, one blob's bytes swapped
        for m in src.getmembers():
            data = src.extractfile(m).read()
            if m.name.startswith("blobs/") and data == BASE_LAYER:
                data = APP_LAYER  # a valid layer, but not the one the manifest names
            m.size = len(data)
            dst.addfile(m, io.BytesIO(data))
    with pytest.raises(TemperError, match="reads as sha256:"):
        store.load(bad)
    assert store.images() == [] and not any((store.root / "layers").iterdir())  # nothing half-made is kept


@pytest.mark.parametrize("damage", ["not-a-tar", "no-manifest", "two-images", "missing-blob"])
def test_a_malformed_archive_is_refused_with_one_line_naming_it(store, tmp_path, damage):
    path = tmp_path / f"{damage}.tar"
    if damage == "not-a-tar":
        path.write_text("hello")
    else:
        docker_archive(path, [BASE_LAYER], [])
        with tarfile.open(path) as tar:
            files = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        if damage == "no-manifest":
            del files["manifest.json"]
        elif damage == "two-images":
            entry = json.loads(files["manifest.json"])[0]
            files["manifest.json"] = json.dumps([entry, entry]).encode()
        else:
            del files[next(n for n in files if n.endswith("layer.tar"))]
        with tarfile.open(path, "w") as tar:
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    with pytest.raises(TemperError) as err:
        store.load(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
