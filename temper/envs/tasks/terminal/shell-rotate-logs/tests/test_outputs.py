"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import gzip
import os


def test_rotated():
    assert sorted(os.listdir("/app/var/log")) == ["app-20240201.log.gz", "app-20240310.log.gz", "app-20240315.log",
                                                  "keep-me.txt"]
    assert gzip.open("/app/var/log/app-20240310.log.gz").read() == b"mar10\n"
    assert os.access("/app/rotate.sh", os.X_OK)


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
