"""The supervisor's wire: frames of a JSON header and raw bytes, its JSON through CPython's C accelerator
(the same text as the json package's, without importing it: a cold start's milliseconds)."""

import io
import json
import subprocess
from pathlib import Path

import pytest

from temper.sandbox.inside import wire

VALUES = [{}, [], "", 0, -1.5e300, None, True, {"a": 'q"\\\n\t\u2603\x00', "n": [1, [2, [3.25]]], "e": {}},
          {"argv": ["bash", "-c", "echo é"], "env": {"PATH": "/usr/bin"}, "timeout": 30.0, "stdin": False}]


@pytest.mark.parametrize("value", VALUES)
def test_the_c_codec_writes_what_json_writes_and_reads_it_back(value: object) -> None:
    assert wire.dumps(value) == json.dumps(value, separators=(",", ":"))
    assert wire.loads(wire.dumps(value)) == value == wire.loads(json.dumps(value).encode())


def test_bad_text_is_a_value_error_and_frames_round_trip() -> None:
    for bad in (b'{"a":1} x', b"{", b"\xff", b"[1,]"):
        with pytest.raises(ValueError):
            wire.loads(bad)
    with pytest.raises(TypeError):
        wire.dumps({"a": object()})
    buf = io.BytesIO()
    wire.send(buf, {"op": "exec", "seq": 3}, b"\x00raw bytes")
    buf.seek(0)
    assert wire.recv(buf) == ({"op": "exec", "seq": 3}, b"\x00raw bytes") and wire.recv(buf) is None


def test_the_supervisor_imports_neither_json_nor_enum() -> None:
    """What a cold start pays for: the supervisor's modules on the system Python, as a sandbox runs them."""
    inside = Path(wire.__file__).parent
    code = f"import sys; sys.path.insert(0, {str(inside)!r}); import server; print(sorted(sys.modules))"
    loaded = subprocess.run(["/usr/bin/python3", "-S", "-B", "-c", code], capture_output=True, text=True,
                            check=True).stdout
    for heavy in ("'json'", "'enum'", "'re'", "'socket'", "'signal'"):
        assert heavy not in loaded, heavy
