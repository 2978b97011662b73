"""Checks run by tests/test.sh inside the sandbox, after the agent phase."""

from pathlib import Path


def test_ips_replaced_and_rest_kept():
    lines = Path("/app/access_anon.log").read_text().splitlines()
    assert len(lines) == 3
    assert all(line.startswith("0.0.0.0 - - [10/Oct/2024") for line in lines)
    assert "/api/v1.2/items" in lines[1] and lines[2].endswith("302 0 from 0.0.0.0")
    assert "192.168.1.10" in Path("/app/access.log").read_text()


if __name__ == "__main__":  # runs without pytest too (faster); pytest collects the test_ functions
    import sys as _sys

    _nonce = _sys.stdin.readline().strip()  # test.sh's, made for this run: printed only after the last check
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and callable(_fn):
            _fn()
    print("all checks passed", _nonce)
