"""Read-only queries over a run's `store.sqlite` (temper/orchestrator/store.py): filtered pages of
episodes, one episode, its group. The dashboard never loads the whole store: a page is one indexed
query (newest first, keyset paging on `seq`), and the match count stops at COUNT_CAP.

The connection is opened per request, read-only: `mode=ro` while the writer's WAL file exists (a live
run; SQLite then reads its WAL), `immutable=1` when it does not (a finished run: SQLite creates no
-wal/-shm files, so the folder is left exactly as it was).
"""

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

COUNT_CAP = 10_000
PAGE_SIZE = 50
COLUMNS = ("seq", "id", "group_id", "task_id", "domain", "status", "reward", "min_version", "max_version",
           "failure", "attempts", "consumed_step", "created")


class StoreError(Exception):
    """The store is missing or unreadable: the page says so in one line."""


@dataclass
class Filters:
    status: str | None = None
    task: str | None = None
    domain: str | None = None
    failure: str | None = None  # a failure kind, or "none" for episodes without one
    step: int | None = None  # the trainer step that consumed it
    min_reward: float | None = None
    max_reward: float | None = None

    def where(self) -> tuple[str, list[Any]]:
        clauses, args = ["status != 'in_flight'"], []
        for column, value in (("status", self.status), ("task_id", self.task), ("domain", self.domain),
                              ("consumed_step", self.step)):
            if value not in (None, ""):
                clauses.append(f"{column} = ?")
                args.append(value)
        if self.failure == "none":
            clauses.append("failure IS NULL")
        elif self.failure:
            clauses.append("failure = ?")
            args.append(self.failure)
        if self.min_reward is not None:
            clauses.append("reward >= ?")
            args.append(self.min_reward)
        if self.max_reward is not None:
            clauses.append("reward <= ?")
            args.append(self.max_reward)
        return " AND ".join(clauses), args


def connect(path: Path) -> sqlite3.Connection:
    if not path.is_file():
        raise StoreError(f"{path}: no trajectory store in this run folder")
    live = path.with_name(path.name + "-wal").exists()
    uri = f"file:{path}?mode=ro" if live else f"file:{path}?immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True, timeout=5.0)
        db.execute("SELECT 1 FROM trajectories LIMIT 1").fetchall()
    except sqlite3.Error as exc:
        raise StoreError(f"{path}: not a readable trajectory store ({exc})") from None
    return db


def page(path: Path, f: Filters, before: int | None = None, size: int = PAGE_SIZE) -> dict[str, Any]:
    """One page of episodes matching `f`, newest first, starting below `seq` `before`; with the
    (capped) number of matches and the cursor of the next page."""
    where, args = f.where()
    with closing(connect(path)) as db:
        total = db.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM trajectories WHERE {where} LIMIT {COUNT_CAP + 1})",
                           args).fetchone()[0]
        cursor = " AND seq < ?" if before is not None else ""
        rows = db.execute(
            f"SELECT {', '.join(COLUMNS)}, COALESCE(json_array_length(data, '$.info.actions'), "
            f"json_extract(data, '$.info.tool_calls')), json_extract(data, '$.truncated') "
            f"FROM trajectories WHERE {where}{cursor} ORDER BY seq DESC LIMIT ?",
            [*args, *([before] if before is not None else []), size + 1]).fetchall()
    items = [{**dict(zip(COLUMNS, r, strict=False)), "tool_calls": r[-2], "truncated": bool(r[-1])}
             for r in rows[:size]]
    return {"items": items, "total": min(total, COUNT_CAP), "total_capped": total > COUNT_CAP,
            "next": items[-1]["seq"] if len(rows) > size else None}


def facets(path: Path) -> dict[str, list[Any]]:
    """The values the filters offer: statuses, domains, failure kinds, steps (from the indexes)."""
    with closing(connect(path)) as db:
        def distinct(column: str) -> list[Any]:
            return [r[0] for r in db.execute(f"SELECT DISTINCT {column} FROM trajectories "
                                             f"WHERE {column} IS NOT NULL ORDER BY 1").fetchall()]
        return {"status": distinct("status"), "domain": distinct("domain"), "failure": distinct("failure"),
                "step": distinct("consumed_step")}


def episode(path: Path, episode_id: str) -> dict[str, Any] | None:
    """One stored row with its trajectory (parsed), or None when there is no such episode."""
    with closing(connect(path)) as db:
        row = db.execute(f"SELECT {', '.join(COLUMNS)}, data FROM trajectories WHERE id = ?", (episode_id,)).fetchone()
    if row is None:
        return None
    out = dict(zip(COLUMNS, row, strict=False))
    out["trajectory"] = json.loads(row[-1]) if row[-1] else None
    return out


def group(path: Path, group_id: str) -> list[dict[str, Any]]:
    """The group's samples: id, status, reward (the advantages are computed from these)."""
    with closing(connect(path)) as db:
        rows = db.execute("SELECT id, status, reward, failure FROM trajectories WHERE group_id = ? ORDER BY seq",
                          (group_id,)).fetchall()
    return [dict(zip(("id", "status", "reward", "failure"), r, strict=True)) for r in rows]


def quarantined(path: Path) -> list[dict[str, Any]]:
    with closing(connect(path)) as db:
        rows = db.execute("SELECT task_id, domain, kind, attempts, message FROM quarantine ORDER BY created").fetchall()
    return [dict(zip(("task_id", "domain", "kind", "attempts", "message"), r, strict=True)) for r in rows]
