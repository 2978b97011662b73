"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import os


def test_sorted():
    got = sorted(os.path.relpath(os.path.join(d, f), "/app/sorted") for d, _, fs in os.walk("/app/sorted") for f in fs)
    assert got == ["gz/archive.tar.gz", "jpg/photo.jpg", "none/Makefile", "pdf/report.pdf", "txt/notes.txt",
                   "txt/todo.txt"]
    assert os.listdir("/app/inbox") == []


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
