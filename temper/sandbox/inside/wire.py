"""Framing between the host and the in-sandbox supervisor: a JSON header plus raw bytes.

A frame is `!II` (header length, blob length), the UTF-8 JSON header, then the blob, so
file contents and command output travel as bytes without base64.
"""

import json
import struct

_HEAD = struct.Struct("!II")
MAX_HEADER = 16 << 20


def send(out, meta: dict, blob: bytes = b"") -> None:
    header = json.dumps(meta, separators=(",", ":")).encode()
    if len(header) > MAX_HEADER:  # the other side would refuse it and drop the connection: say why instead
        header = json.dumps({"error": f"reply of {len(header)} bytes is over the {MAX_HEADER}-byte limit",
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
    return json.loads(header), blob


def _read_exact(inp, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        chunk = inp.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)
