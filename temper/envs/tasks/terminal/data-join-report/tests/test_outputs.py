"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import csv


def test_report():
    rows = list(csv.reader(open("/app/report.csv")))
    assert rows == [["name", "orders", "total"], ["Globex", "3", "325.00"], ["Acme Ltd", "2", "250.50"],
                    ["Initech", "1", "99.90"]]


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
