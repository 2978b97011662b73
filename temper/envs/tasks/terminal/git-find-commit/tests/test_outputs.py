"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

REPO = "/app/lib"

import subprocess


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_hash():
    want = git("log", "--format=%H", "--grep", "Speed up parsing")
    assert len(want) == 40
    assert open("/app/answer.txt").read().strip() == want


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
