"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import os
import stat


def test_modes():
    for name in ("build.sh", "deploy.sh"):
        assert os.stat(f"/app/scripts/{name}").st_mode & stat.S_IXUSR
    assert stat.S_IMODE(os.stat("/app/secret.txt").st_mode) == 0o600


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
