"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import csv


def test_summary():
    rows = list(csv.reader(open("/app/summary.csv")))
    assert rows == [['city', 'min', 'max', 'mean'], ['Cairo', '-4.4', '34.2', '17.90'], ['Lima', '0.9', '28.0', '11.46'], ['Oslo', '1.6', '33.2', '14.56']]


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
