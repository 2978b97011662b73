"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import csv


def test_csv():
    rows = list(csv.reader(open("/app/users.csv", newline="")))
    assert rows == [["id", "name", "email"], ["1", "Ana Lima", "ana@example.com"],
                    ['2', 'Bob "Bobby" Ray', "bob@example.com"], ["3", "Chen Wei", "chen@example.com"]]


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
