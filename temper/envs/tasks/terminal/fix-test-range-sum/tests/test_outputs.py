"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import subprocess
import sys

sys.path.insert(0, "/app/repo")


def test_repo_tests_pass():
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], cwd="/app/repo",
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:]


def test_hidden_cases():
    from mathutil import range_sum

    assert range_sum(5, 5) == 5 and range_sum(-2, 2) == 0 and range_sum(1, 100) == 5050


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
