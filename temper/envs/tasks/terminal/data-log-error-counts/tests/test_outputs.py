"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import json


def test_counts():
    assert json.load(open("/app/errors.json")) == {"db": 7, "auth": 6, "api": 14, "cache": 1}


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
