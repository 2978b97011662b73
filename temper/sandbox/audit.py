"""Append-only JSONL audit log of every request made to a sandbox, hash-chained.

Each record carries `prev` (the previous record's hash) and `hash` = sha256 of the record's
canonical JSON without `hash`, so removing, reordering or editing any record breaks the
chain at that point. Removing records from the end is detected only against a head hash kept
elsewhere (`verify` reports the head for that). Written by the host, outside every sandbox's
mount view; appends from several processes are serialised with flock.
"""

import fcntl
import hashlib
import json
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any, ClassVar

GENESIS = "0" * 64


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _digest(record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "hash"}
    return sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


class AuditLog:
    _shared: ClassVar[weakref.WeakValueDictionary] = weakref.WeakValueDictionary()  # path -> AuditLog
    _shared_lock = threading.Lock()

    @classmethod
    def shared(cls, path: str | Path) -> "AuditLog":
        """One writer per log file in this process (sandboxes of one run share it)."""
        key = Path(path).resolve()
        with cls._shared_lock:
            log = cls._shared.get(key)
            if log is None:
                log = cls._shared[key] = cls(key)
            return log

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._size = -1
        self._prev, self._seq = GENESIS, 0

    def append(self, sandbox: str, op: str, **fields: Any) -> dict[str, Any]:
        # Opened per record, not held: a descriptor kept for the process's life is one any stray
        # double close elsewhere in the process (a library's, a test's) can take away mid-run.
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close
                size = os.fstat(fd).st_size
                if size != self._size:  # another writer appended: continue its chain
                    self._prev, self._seq, torn = _tail(self.path)
                    if torn:  # a writer died mid-append: end its fragment's line, chain on from the last intact record
                        size += os.write(fd, b"\n")
                record = {"seq": self._seq, "time": time.time(), "sandbox": sandbox, "op": op, **fields,
                          "prev": self._prev}
                record["hash"] = _digest(record)
                line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
                os.write(fd, line)
                self._size = size + len(line)
                self._prev, self._seq = record["hash"], self._seq + 1
                return record
            finally:
                os.close(fd)


def _tail(path: Path) -> tuple[str, int, bool]:
    """(hash, next seq) of the last intact record, reading back from the end only as far as needed,
    and whether the file ends in a torn record: a writer killed mid-append (SIGKILL can cut a write
    at a page boundary) must not stop every later sandbox of the run from starting."""
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        if not end:
            return GENESIS, 0, False
        f.seek(end - 1)
        torn = f.read(1) != b"\n"
        size = 4096
        while True:
            start = max(0, end - size)
            f.seek(start)
            lines = [ln for ln in f.read().split(b"\n") if ln.strip()]
            for ln in reversed(lines[1:] if start else lines):  # a window's first line may be cut
                try:
                    rec = json.loads(ln)
                    return rec["hash"], rec["seq"] + 1, torn
                except (ValueError, KeyError, TypeError):
                    continue
            if not start:
                return GENESIS, 0, torn
            size *= 4


def verify(path: str | Path) -> tuple[bool, str]:
    """(ok, one line): the first broken record, or the count and head hash when intact."""
    prev, count = GENESIS, 0
    path = Path(path)
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except json.JSONDecodeError:
                return False, f"{path}:{lineno}: not a JSON record (a torn append, or an edit)"
            if rec.get("prev") != prev:
                return False, f"{path}:{lineno}: chain broken (a record before it was removed or edited)"
            if rec.get("hash") != _digest(rec):
                return False, f"{path}:{lineno}: record edited (hash does not match its content)"
            if rec.get("seq") != count:
                return False, f"{path}:{lineno}: sequence {rec.get('seq')} where {count} was expected"
            prev, count = rec["hash"], count + 1
    return True, f"{path}: {count} records intact, head {prev}"
