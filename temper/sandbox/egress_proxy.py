"""Egress to an allowlist for an image sandbox whose task asks for the internet: instead of a route out
(egress.py, for an allowlist of "*"), its network namespace gets one more listening socket on its own
127.0.0.1:PORT, made there by this host process (a socket keeps the namespace it was made in), and every
command's HTTP_PROXY/HTTPS_PROXY names it. The proxy behind it, on the host, forwards `CONNECT host:port`
(HTTPS: pip, npm, git) and absolute-URI requests (HTTP: apt) to a destination on the allowlist, through the
host's own network and configured proxies, and refuses anything else with a 403 naming the destination. No
destination on the host itself (loopback, its own addresses) is ever reached, whatever the allowlist says;
a program that ignores the proxy variables has no route at all."""

import contextlib
import fnmatch
import ipaddress
import logging
import os
import select
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable

import psutil

from temper.sandbox.inside import native

log = logging.getLogger("temper.sandbox")
PORT = 3128  # the squid port: what a program told "a proxy on localhost" tries first
HEAD_LIMIT = 64 << 10
MAX_CONNECTIONS = 64  # open at once per sandbox (a thread each, on the host): more are refused with a 503


class EgressProxy:
    """The allowlisting proxy of one sandbox, listening inside its network namespace (host pid `pid`'s)."""

    def __init__(self, pid: int, hosts: list[str], sandbox_id: str,
                 on_connect: Callable[[str, int, bool], None] | None = None):
        self.hosts, self.id, self.on_connect = [h.lower() for h in hosts], sandbox_id, on_connect
        self.connections = {"allowed": 0, "refused": 0}
        self._listener = _listen_in(pid, PORT)
        self._stop_r, self._stop_w = os.pipe()
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        threading.Thread(target=self._serve, name=f"egress-{sandbox_id}", daemon=True).start()

    def allowed(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        return any(fnmatch.fnmatchcase(f"{host}:{port}", p) if ":" in p else fnmatch.fnmatchcase(host, p)
                   for p in self.hosts)

    def stop(self) -> None:
        """Ends the accepting thread (connections in flight end with the sandbox's network)."""
        fd, self._stop_w = self._stop_w, -1
        if fd >= 0:
            with contextlib.suppress(OSError):  # the thread has gone already: nobody reads
                os.write(fd, b"x")
            os.close(fd)

    def _serve(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self._listener, self._stop_r], [], [])
                if self._stop_r in ready:
                    return
                try:
                    conn, _ = self._listener.accept()
                except OSError as exc:  # out of descriptors, say: the next connection may fare better
                    log.warning("sandbox %s: egress proxy: %s", self.id, exc)
                    time.sleep(0.1)
                    continue
                if not self._slots.acquire(blocking=False):
                    self._reply(conn, 503, f"more than {MAX_CONNECTIONS} connections open at once")
                    conn.close()
                    continue
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            self._listener.close()
            os.close(self._stop_r)

    def _handle(self, conn: socket.socket) -> None:
        upstream = None
        try:
            conn.settimeout(30)
            head = _read_head(conn)
            method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            host, port, rest = _destination(method, target, head)
            ok = self.allowed(host, port)
            self.connections["allowed" if ok else "refused"] += 1
            if self.on_connect is not None:
                self.on_connect(host, port, ok)
            if not ok:
                return self._reply(conn, 403, f"{host}:{port} is not on this sandbox's egress allowlist")
            upstream = _connect(host, port, method == "CONNECT")
            if method == "CONNECT":
                conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                upstream.sendall(rest)
            _relay(conn, upstream)
        except _Refused as exc:
            self._reply(conn, 403, str(exc))
        except (OSError, ValueError) as exc:
            self._reply(conn, 502, f"egress proxy: {exc}")
        finally:
            conn.close()
            if upstream is not None:
                upstream.close()
            self._slots.release()


    def _reply(self, conn: socket.socket, code: int, text: str) -> None:
        body = f"temper: {text}\n".encode()
        reason = {403: b"Forbidden", 502: b"Bad Gateway", 503: b"Service Unavailable"}[code]
        with contextlib.suppress(OSError):
            conn.sendall(b"HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                         b"Connection: close\r\n\r\n%s" % (code, reason, len(body), body))
        log.info("sandbox %s: egress %d: %s", self.id, code, text)


class _Refused(Exception):
    pass


def _listen_in(pid: int, port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` of pid's network namespace (made by a thread that joins it)."""
    box: list = []

    def make() -> None:
        try:
            fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
            try:
                native.setns(fd, native.CLONE_NEWNET)
            finally:
                os.close(fd)
            box.append(socket.create_server(("127.0.0.1", port), backlog=64))
        except OSError as exc:
            box.append(exc)

    t = threading.Thread(target=make)  # the thread stays in that namespace and ends: no way back needed
    t.start()
    t.join()
    if isinstance(box[0], OSError):
        raise box[0]
    return box[0]


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk or len(data) > HEAD_LIMIT:
            raise ValueError("no complete request head")
        data += chunk
    return data


def _destination(method: str, target: str, head: bytes) -> tuple[str, int, bytes]:
    """(host, port, what to send upstream): CONNECT host:port, or an absolute http:// URI made origin-form
    (one request per connection: a second one on it could name another host)."""
    if method == "CONNECT":
        url = urllib.parse.urlsplit(f"//{target}")
        if url.hostname is None or url.port is None:
            raise ValueError(f"CONNECT {target[:80]}: not host:port")
        return url.hostname, url.port, b""
    url = urllib.parse.urlsplit(target)
    if url.scheme != "http" or url.hostname is None:
        raise ValueError(f"{method} {target[:80]}: only CONNECT and http:// URIs go through this proxy")
    headers, _, body = head.partition(b"\r\n\r\n")
    first, *fields = headers.split(b"\r\n")
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    keep = [f for f in fields if not f.lower().startswith((b"proxy-", b"connection:", b"keep-alive:"))]
    request = b"\r\n".join([b"%s %s %s" % (method.encode(), path.encode(), first.rsplit(b" ", 1)[1]), *keep,
                             b"Connection: close", b"", b""])
    return url.hostname, url.port or 80, request + body


def _connect(host: str, port: int, tunnel: bool) -> socket.socket:
    """To host:port through the host's configured proxy for it, if any; never to the host itself."""
    proxies = urllib.request.getproxies()
    via = proxies.get("https" if tunnel else "http")
    if via and not urllib.request.proxy_bypass(host):
        p = urllib.request.urlparse(via)
        up = socket.create_connection((p.hostname, p.port or 3128), timeout=30)
        up.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        if b" 200 " not in _read_head(up).split(b"\r\n", 1)[0] + b" ":
            up.close()
            raise OSError(f"the host's proxy {p.hostname} refused {host}:{port}")
        return up
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    own = {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs}
    for *_, addr in infos:
        ip = ipaddress.ip_address(addr[0])
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast or addr[0] in own:
            raise _Refused(f"{host}:{port} is this machine ({addr[0]}): never reached from a sandbox")
    family, kind, proto, _, addr = infos[0]
    up = socket.socket(family, kind, proto)
    up.settimeout(30)
    up.connect(addr)
    return up


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Bytes both ways until either side closes."""
    a.settimeout(None)
    b.settimeout(None)
    pair = {a: b, b: a}
    while True:
        ready, _, _ = select.select(list(pair), [], [], 600)
        if not ready:
            return
        for s in ready:
            data = s.recv(65536)
            if not data:
                return
            pair[s].sendall(data)
