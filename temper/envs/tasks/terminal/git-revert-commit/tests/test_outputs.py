"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

REPO = "/app/service"

import subprocess


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_reverted():
    import json

    cfg = json.load(open("/app/service/config.json"))
    assert cfg == {"debug": False, "workers": 8, "name": "svc"}
    assert git("rev-list", "--count", "HEAD") == "5"
    assert git("log", "--format=%s", "HEAD~1", "-1") == "Name the service"
    assert git("status", "--porcelain") == ""


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
