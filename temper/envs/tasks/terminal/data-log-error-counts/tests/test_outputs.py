"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

import json


def test_counts():
    assert json.load(open("/app/errors.json")) == {"db": 7, "auth": 6, "api": 14, "cache": 1}


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed")
