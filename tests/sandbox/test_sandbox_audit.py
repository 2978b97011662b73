"""Every request lands in the hash-chained audit log; a removed or edited record is detected."""

import hashlib
import json
import os
from pathlib import Path

import pytest
from conftest import make_config

from temper.sandbox import AuditLog, Sandbox, verify


@pytest.mark.timeout(60)
def test_audit_log_records_every_request_and_detects_tampering(state_dir: Path, template: Path,
                                                                tmp_path: Path) -> None:
    cfg = make_config("bwrap", state_dir, template, tmp_path / "run")
    with Sandbox(cfg) as sb:
        sb.exec(["echo", "hi"], stdin="in")
        sb.write_file("a.txt", "content")
        sb.read_file("a.txt")
        sb.list_files()
        sb.exec("sleep 5", timeout=0.5)
        sb.reset()
    log = cfg.audit_path
    records = [json.loads(line) for line in log.read_text().splitlines()]
    ops = [r["op"] for r in records]
    assert ops == ["create", "exec", "write_file", "read_file", "list_files", "exec", "reset", "close"]
    ex = records[1]
    assert ex["argv"] == ["echo", "hi"] and ex["exit_code"] == 0 and ex["stdout_bytes"] == 3
    assert ex["stdout_sha256"] == hashlib.sha256(b"hi\n").hexdigest()
    assert ex["stdin_sha256"] == hashlib.sha256(b"in").hexdigest() and ex["limits"]["memory_mb"] == 256
    assert records[2]["sha256"] == hashlib.sha256(b"content").hexdigest() and records[2]["bytes"] == 7
    assert records[5]["limit"] == "wall_time" and records[5]["timeout_s"] == 0.5
    assert all(r["sandbox"] == sb.id for r in records)
    ok, line = verify(log)
    assert ok and "8 records intact" in line

    lines = log.read_text().splitlines(keepends=True)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(lines).replace('"exit_code":0', '"exit_code":1', 1))
    removed = tmp_path / "removed.jsonl"
    removed.write_text("".join(lines[:3] + lines[4:]))
    for bad, why in ((edited, "edited"), (removed, "chain broken")):
        ok, line = verify(bad)
        assert not ok and why in line


def test_audit_log_chains_across_writers(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    a, b = AuditLog(path), AuditLog(path)
    for i in range(5):
        (a if i % 2 else b).append("sb", "exec", i=i)
    head = json.loads(path.read_text().splitlines()[-1])["hash"]
    assert verify(path) == (True, f"{path}: 5 records intact, head {head}")


def test_a_torn_last_record_does_not_stop_later_writers(tmp_path: Path) -> None:
    """A writer killed mid-append leaves a cut line (seen in CI: cut at a page boundary); the next
    writer ends that line and chains on from the last intact record; verify names the torn line."""
    path = tmp_path / "a.jsonl"
    a = AuditLog(path)
    for i in range(3):
        a.append("sb", "exec", i=i)
    intact = json.loads(path.read_text().splitlines()[-1])
    with open(path, "ab") as f:
        f.write(b'{"seq":3,"time":1.0,"sandbox":"sb","op":"upload","src":"/tmp/x","prev')  # no newline
    b = AuditLog(path)
    rec = b.append("sb", "exec", i=4)
    assert rec["prev"] == intact["hash"] and rec["seq"] == intact["seq"] + 1
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and json.loads(lines[-1]) == rec
    ok, why = verify(path)
    assert not ok and f"{path}:4: not a JSON record (a torn append" in why


def test_the_log_holds_no_descriptor_between_records(tmp_path: Path) -> None:
    """Seen in CI: a descriptor held for the run was closed by a stray double close elsewhere in the
    process, and a later sandbox's append failed with EBADF. Between records nothing is held."""
    before = set(os.listdir("/proc/self/fd"))
    log = AuditLog(tmp_path / "a.jsonl")
    log.append("sb", "exec", i=0)
    assert set(os.listdir("/proc/self/fd")) <= before
    log.append("sb", "exec", i=1)
    assert verify(tmp_path / "a.jsonl")[0]
