"""Networking helpers every layer may use (a leaf: the standard library only)."""

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at `host` now (the OS picks it; another process may take it before use)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
