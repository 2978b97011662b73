"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import os
import subprocess
import tarfile


def test_backup():
    os.makedirs("/tmp/work/notes", exist_ok=True)
    open("/tmp/work/notes/a.txt", "w").write("a\n")
    r = subprocess.run(["/app/backup.sh", "/tmp/work/notes"], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "/app/backups/notes.tar.gz"
    with tarfile.open("/app/backups/notes.tar.gz") as t:
        assert "notes/a.txt" in t.getnames()
    subprocess.run(["/app/backup.sh", "/app/site"], check=True, capture_output=True)
    with tarfile.open("/app/backups/site.tar.gz") as t:
        assert {"site/index.html", "site/css/main.css"} <= set(t.getnames())

def test_not_a_folder():
    r = subprocess.run(["/app/backup.sh", "/nope"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stderr.strip()


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
