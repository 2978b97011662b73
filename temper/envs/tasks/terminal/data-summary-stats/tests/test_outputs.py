"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import json


def test_stats():
    got = json.load(open("/app/stats.json"))
    want = {"mean": 475, "median": 475, "stdev": 0.0}
    assert set(got) == set(want)
    assert all(abs(got[k] - want[k]) < 1e-3 for k in want)


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
