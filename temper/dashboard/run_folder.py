"""One train run folder, read as the dashboard shows it: status, config, metrics, audit log, before/after.

Every read tolerates a run that is being written: a torn last line of `metrics.jsonl` is skipped, a
corrupt line in the middle is reported by number (and the rest still shown), missing files are `None`.
"""

import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

LIVE_WINDOW_S = 300.0  # a run whose files changed this recently, and whose process we cannot see, is running


@dataclass
class JsonLines:
    rows: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def read_jsonl(path: Path, since: int = 0) -> JsonLines:
    """Rows of a JSON-lines file from row `since` on; a bad line is a problem naming it, a torn last line is skipped."""
    out = JsonLines()
    try:
        lines = path.read_text(errors="replace").split("\n")
    except FileNotFoundError:
        return out
    torn = lines[-1] != ""  # the writer appends "...}\n": a last piece without its newline is still being written
    good = 0
    for number, line in enumerate(lines[:-1] if not torn else lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            if not (torn and number == len(lines)):
                out.problems.append(f"{path.name} line {number}: not a JSON object ({str(exc).split(':')[0]}), skipped")
            continue
        if good >= since:
            out.rows.append(row)
        good += 1
    return out


class RunFolder:
    def __init__(self, path: Path):
        self.path = path

    def config(self) -> dict[str, Any]:
        try:
            data = yaml.safe_load((self.path / "config.yaml").read_text())
        except (OSError, yaml.YAMLError):
            return {}
        return data if isinstance(data, dict) else {}

    def metrics(self, since: int = 0) -> JsonLines:
        return read_jsonl(self.path / "metrics.jsonl", since)

    def audit(self) -> JsonLines:
        return read_jsonl(self.path / "audit.jsonl")

    def read_json(self, name: str) -> dict[str, Any] | None:
        try:
            data = json.loads((self.path / name).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def summary(self) -> dict[str, Any] | None:
        return self.read_json("summary.json")

    def last_write(self) -> float:
        times = [p.stat().st_mtime for p in (self.path / n for n in
                 ("metrics.jsonl", "audit.jsonl", "store.sqlite", "store.sqlite-wal")) if p.exists()]
        return max(times, default=0.0)

    def checkpoints(self) -> list[str]:
        return sorted(p.name for p in (self.path / "checkpoints").glob("step_*") if p.is_dir())

    def status(self) -> str:
        """finished | running | crashed (resumable) | crashed: from summary.json, the writer's PID, the files' age."""
        if self.summary() is not None:
            return "finished"
        starts = [r for r in self.audit().rows if r.get("kind") in ("start", "resume")]
        last = starts[-1] if starts else {}
        if last.get("host") == socket.gethostname() and isinstance(last.get("pid"), int):
            alive = _pid_alive(last["pid"])
        else:  # written elsewhere (or by an older temper): judge by how recently it changed
            alive = time.time() - self.last_write() < LIVE_WINDOW_S
        if alive:
            return "running"
        return "crashed (resumable)" if self.checkpoints() else "crashed"

    def before_after(self) -> dict[str, Any]:
        """The held-out evaluation before and after, as summary.json has it, or as far as the run got."""
        s = self.summary() or {}
        return {"before": s.get("before") or _eval_line(self.read_json("eval_before.json")),
                "after": s.get("after") or _eval_line(self.read_json("eval_after.json")),
                "difference": s.get("difference")}


def _eval_line(data: dict[str, Any] | None) -> dict[str, Any] | None:
    if data is None:
        return None
    return {k: data[k] for k in ("n", "mean_reward", "ci_low", "ci_high", "failed") if k in data}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped: a test's child) is not running
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def numeric_series(rows: list[dict[str, Any]]) -> dict[str, list[float | None]]:
    """Every numeric metrics field as one series over the rows (None where a row lacks it), `step` first."""
    keys: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                keys.setdefault(k)
    return {k: [r.get(k) if isinstance(r.get(k), (int, float)) else None for r in rows] for k in keys}
