"""Framing between the host and the in-sandbox supervisor: a JSON header plus raw bytes.

A frame is `!II` (header length, blob length), the UTF-8 JSON header, then the blob, so
file contents and command output travel as bytes without base64.

The JSON goes through CPython's C accelerator (`_json`) alone: `import json` would cost a cold start ~3 ms
(json.decoder imports re, re imports enum), and the C scanner and encoder it wraps need neither. Where `_json`
is missing or its interface differs (not CPython, a future version), the json package does it: the same text.
"""

import struct


class _Context:  # what _json.make_scanner reads from json.JSONDecoder
    strict = True
    object_hook = object_pairs_hook = None
    parse_float, parse_int, parse_constant = float, int, float


def _no_default(obj: object) -> object:
    raise TypeError(f"{type(obj).__name__} is not JSON serializable")


try:
    import _json

    _scan = _json.make_scanner(_Context())
    _encode = _json.make_encoder(None, _no_default, _json.encode_basestring_ascii, None, ":", ",", False, False, True)

    def dumps(obj: object) -> str:
        return "".join(_encode(obj, 0))

    def loads(text: str | bytes) -> object:
        s = text.decode() if isinstance(text, (bytes, bytearray)) else text
        try:
            obj, end = _scan(s, 0)
        except StopIteration as exc:
            raise ValueError(f"not JSON at {exc.value}") from None
        if end != len(s):
            raise ValueError(f"extra data at {end}")
        return obj

    if loads(dumps(probe := {"a": [1, 2.5, "é\n", None, True]})) != probe:
        raise ImportError("_json behaves differently here")
except (ImportError, AttributeError, TypeError):
    from json import loads

    def dumps(obj: object) -> str:
        import json

        return json.dumps(obj, separators=(",", ":"))


_HEAD = struct.Struct("!II")
MAX_HEADER = 16 << 20


def send(out, meta: dict, blob: bytes = b"") -> None:
    header = dumps(meta).encode()
    if len(header) > MAX_HEADER:  # the other side would refuse it and drop the connection: say why instead
        header = dumps({"error": f"reply of {len(header)} bytes is over the {MAX_HEADER}-byte limit",
                             "errno": 27}).encode()  # EFBIG
        blob = b""
    out.write(_HEAD.pack(len(header), len(blob)) + header + blob)
    out.flush()


def recv(inp) -> tuple[dict, bytes] | None:
    """The next frame, or None when the other side has gone (EOF)."""
    head = _read_exact(inp, _HEAD.size)
    if head is None:
        return None
    hlen, blen = _HEAD.unpack(head)
    if hlen > MAX_HEADER:
        raise ValueError(f"frame header of {hlen} bytes")
    header = _read_exact(inp, hlen)
    blob = _read_exact(inp, blen) if blen else b""
    if header is None or blob is None:
        return None
    return loads(header), blob


def _read_exact(inp, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = inp.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
