"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import subprocess


def test_output():
    out = subprocess.run(["/app/fizzbuzz.sh", "15"], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "2", "Fizz", "4", "Buzz", "Fizz", "7", "8", "Fizz", "Buzz", "11", "Fizz", "13", "14",
                   "FizzBuzz"]

def test_usage():
    r = subprocess.run(["/app/fizzbuzz.sh"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: fizzbuzz.sh N" in r.stderr


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
