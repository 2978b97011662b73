"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

from pathlib import Path


def test_names():
    files = {p.name: p.read_text() for p in Path("/app/photos").iterdir()}
    assert files == {"my_trip_01.jpg": "1\n", "beach_day.png": "2\n", "already_ok.gif": "3\n",
                     "upper_case_name.jpeg": "4\n"}


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
