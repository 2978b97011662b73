"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

REPO = "/app/app"

import subprocess


def git(*args):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.strip()


def test_merged():
    assert open("/app/app/VERSION").read().strip() == "2.0.0-feature"
    assert "def new_feature" in open("/app/app/feature.py").read()
    assert "hotfix" in open("/app/app/main.py").read()
    assert git("rev-parse", "--abbrev-ref", "HEAD") == "main"
    assert len(git("log", "-1", "--format=%P").split()) == 2  # a merge commit
    subprocess.run(["git", "-C", REPO, "merge-base", "--is-ancestor", "feature", "HEAD"], check=True)
    assert git("status", "--porcelain") == ""


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
