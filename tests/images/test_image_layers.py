"""An image layer is unpacked into a folder overlayfs can stack, trusting none of its entries."""

import os
import stat
from pathlib import Path

import pytest
from image_helpers import layer_tar

from temper.images import layers

BASE = 1_000_000


def unpack(tmp_path: Path, entries: list[tuple], name: str = "layer") -> Path:
    dest = tmp_path / name
    path = tmp_path / f"{name}.tar"
    path.write_bytes(layer_tar(entries))
    with open(path, "rb") as f:
        layers.unpack(f, dest, BASE)
    return dest


def test_files_keep_modes_and_setuid_and_owners_shift_by_the_base(tmp_path):
    dest = unpack(tmp_path, [("dir", "usr/bin"), ("file", "usr/bin/su", "x", 0o4755, 0),
                             ("file", "home/me/notes", "hi", 0o600, 1000), ("file", "weird", "", 0o644, 70000)])
    su = (dest / "usr/bin/su").stat()
    assert stat.S_IMODE(su.st_mode) == 0o4755 and su.st_uid == BASE  # root inside is the base outside
    notes = (dest / "home/me/notes").stat()
    assert (notes.st_uid, notes.st_gid, stat.S_IMODE(notes.st_mode)) == (BASE + 1000, BASE + 1000, 0o600)
    assert (dest / "weird").stat().st_uid == BASE + 65534  # beyond the 65,536 ids: nobody


def test_a_symlinked_parent_resolves_inside_the_layer_never_onto_the_host(tmp_path):
    outside = tmp_path / "host-etc"
    outside.mkdir()
    dest = unpack(tmp_path, [("dir", "real"), ("symlink", "abs", str(outside)), ("symlink", "rel", "../../../.."),
                             ("file", "abs/passwd", "pwned"), ("file", "rel/evil", "pwned")])
    assert not (outside / "passwd").exists() and not (tmp_path / "evil").exists()
    # as the container would see it: /abs -> <host path> inside the root, /rel -> / (clamped)
    assert (dest / str(outside).lstrip("/") / "passwd").read_text() == "pwned"
    assert (dest / "evil").read_text() == "pwned"


def test_an_entry_replaces_a_link_instead_of_writing_through_it(tmp_path):
    target = tmp_path / "victim"
    target.write_text("safe")
    dest = unpack(tmp_path, [("symlink", "x", str(target)), ("file", "x", "pwned")])
    assert target.read_text() == "safe" and (dest / "x").read_text() == "pwned" and not (dest / "x").is_symlink()


def test_dotdot_is_refused_with_the_entry_named(tmp_path):
    with pytest.raises(layers.LayerError, match=r"'a/\.\./\.\./x'"):
        unpack(tmp_path, [("file", "a/../../x", "pwned")])
    assert not (tmp_path / "x").exists()


def test_whiteouts_become_overlay_whiteouts_and_devices_are_dropped(tmp_path):
    dest = unpack(tmp_path, [("dir", "etc"), ("file", "etc/.wh.motd", ""), ("dir", "var/cache"),
                             ("file", "var/cache/.wh..wh..opq", ""), ("chr", "dev/null")])
    st = os.lstat(dest / "etc/motd")
    assert stat.S_ISCHR(st.st_mode) and os.major(st.st_rdev) == 0 and os.minor(st.st_rdev) == 0
    assert os.getxattr(dest / "var/cache", "user.overlay.opaque") == b"y"
    assert not (dest / "var/cache/.wh..wh..opq").exists() and not (dest / "dev/null").exists()


def test_hard_links_point_at_the_entry_they_name(tmp_path):
    dest = unpack(tmp_path, [("file", "bin/python3.13", "elf"), ("hardlink", "bin/python3", "bin/python3.13")])
    assert os.path.samefile(dest / "bin/python3", dest / "bin/python3.13")
    with pytest.raises(layers.LayerError, match="not an earlier entry"):
        unpack(tmp_path, [("hardlink", "bin/x", "/etc/shadow")], name="bad")


def test_disk_bytes_counts_a_hard_linked_file_once(tmp_path):
    big = "x" * 100_000
    one = unpack(tmp_path, [("file", "a", big)], name="one")
    two = unpack(tmp_path, [("file", "a", big), ("hardlink", "b", "a")], name="two")
    assert layers.disk_bytes(one) == layers.disk_bytes(two) >= 100_000
