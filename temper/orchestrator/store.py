"""The durable trajectory store: an append-only SQLite database (WAL) in the run folder.

A trajectory is written, and committed, before the pipeline acknowledges it (hands it to the
trainer), so `kill -9` never loses a completed one. Status moves in_flight -> complete | failed
| filtered, then complete -> consumed when a step trains on it. The consumption mark names its
step, and `commit_step` records the step's checkpoint in the same transaction: on resume,
marks of steps after the last committed checkpoint are undone (those steps' weights are gone),
so nothing is lost and nothing is trained on twice.
"""

import json
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from temper.trajectory import Trajectory

SCHEMA = """
CREATE TABLE IF NOT EXISTS trajectories (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,   -- arrival order: batches are taken first in, first out
    id TEXT UNIQUE NOT NULL,
    group_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    domain TEXT NOT NULL,
    status TEXT NOT NULL,                    -- in_flight | complete | failed | filtered | consumed | stale
    reward REAL,
    min_version INTEGER,
    max_version INTEGER,
    failure TEXT,
    attempts INTEGER DEFAULT 1,
    consumed_step INTEGER,
    created REAL NOT NULL,
    data TEXT                                -- the Trajectory as JSON
);
CREATE INDEX IF NOT EXISTS traj_status ON trajectories(status, seq);
CREATE INDEX IF NOT EXISTS traj_group ON trajectories(group_id);
-- the dashboard's filters (temper/dashboard/store_query.py) page through 100,000s of rows with these
CREATE INDEX IF NOT EXISTS traj_task ON trajectories(task_id, seq);
CREATE INDEX IF NOT EXISTS traj_domain ON trajectories(domain, seq);
CREATE INDEX IF NOT EXISTS traj_step ON trajectories(consumed_step, seq);
CREATE INDEX IF NOT EXISTS traj_failure ON trajectories(failure, seq);
CREATE INDEX IF NOT EXISTS traj_reward ON trajectories(reward);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY,                -- trainer step (policy version after it)
    checkpoint TEXT,                         -- the checkpoint folder this step's marks commit with
    metrics TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS replays (step INTEGER NOT NULL, group_id TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS quarantine (
    task_id TEXT PRIMARY KEY, domain TEXT NOT NULL, kind TEXT, attempts INTEGER, message TEXT, created REAL
);
CREATE TABLE IF NOT EXISTS events (created REAL NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL);
"""


class Store:
    """One connection, used from the pipeline's threads under a lock (SQLite writes are serial anyway)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a commit is on disk when it returns
        self._db.executescript(SCHEMA)
        self._lock = threading.RLock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _tx(self, statements: Iterable[tuple[str, tuple]]) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    self._db.execute(sql, args)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def _rows(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # ---- writing ---------------------------------------------------------------------------
    def start_group(self, group_id: str, task_id: str, domain: str, n: int) -> None:
        now = time.time()
        self._tx(("INSERT OR REPLACE INTO trajectories (id, group_id, task_id, domain, status, created) "
                  "VALUES (?, ?, ?, ?, 'in_flight', ?)", (f"{group_id}/{i}", group_id, task_id, domain, now))
                 for i in range(n))

    def finish_group(self, group_id: str, trajectories: list[Trajectory], status: str, attempts: list[int]) -> None:
        """Replace the group's in-flight rows by its trajectories (one transaction); `status` is the
        group's (complete or filtered); a trajectory with an infrastructure failure is 'failed'."""
        rows = []
        for i, (t, tries) in enumerate(zip(trajectories, attempts, strict=True)):
            st = "failed" if t.failure is not None else status
            rows.append(("UPDATE trajectories SET status=?, reward=?, min_version=?, max_version=?, failure=?, "
                         "attempts=?, data=? WHERE id=?",
                         (st, t.reward, t.min_version(), max(t.versions, default=-1),
                          t.failure.value if t.failure else None, tries, json.dumps(t.to_dict()),
                          f"{group_id}/{i}")))
        self._tx(rows)

    def quarantine(self, task_id: str, domain: str, kind: str, attempts: int, message: str) -> None:
        self._tx([("INSERT OR REPLACE INTO quarantine VALUES (?, ?, ?, ?, ?, ?)",
                   (task_id, domain, kind, attempts, message[:2000], time.time()))])

    def mark_stale(self, group_ids: list[str]) -> None:
        self._tx(("UPDATE trajectories SET status='stale' WHERE group_id=? AND status='complete'", (g,))
                 for g in group_ids)

    def commit_steps(self, steps: list[tuple[int, list[str], list[str], dict[str, float]]],
                     checkpoint: str | None) -> None:
        """One transaction: the consumption marks of `steps` (step, fresh groups, replayed groups,
        metrics) and the checkpoint that holds their weights. Before it commits, those groups are
        still 'complete' in the store; a crash before it means the steps are retrained from the
        previous checkpoint on the same data: nothing lost, nothing counted twice."""
        rows: list[tuple[str, tuple]] = []
        for step, groups, replayed, metrics in steps:
            rows += [("UPDATE trajectories SET status='consumed', consumed_step=? WHERE group_id=? "
                      "AND status='complete'", (step, g)) for g in groups]
            rows += [("INSERT INTO replays VALUES (?, ?)", (step, g)) for g in replayed]
            rows.append(("INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?)",
                         (step, checkpoint, json.dumps(metrics), time.time())))
        self._tx(rows)

    # ---- reading ---------------------------------------------------------------------------
    def complete_groups(self) -> list[str]:
        """Group ids whose trajectories are all done and at least one is trainable, oldest first."""
        rows = self._rows("SELECT group_id, MIN(seq) FROM trajectories GROUP BY group_id "
                          "HAVING SUM(status='complete') > 0 AND SUM(status IN ('in_flight')) = 0 ORDER BY 2")
        return [r[0] for r in rows]

    def group(self, group_id: str) -> list[Trajectory]:
        rows = self._rows("SELECT data FROM trajectories WHERE group_id=? AND data IS NOT NULL ORDER BY id",
                          (group_id,))
        return [Trajectory.from_dict(json.loads(r[0])) for r in rows]

    def last_committed_step(self) -> tuple[int, str | None]:
        rows = self._rows("SELECT step, checkpoint FROM steps WHERE checkpoint IS NOT NULL ORDER BY step DESC LIMIT 1")
        return (rows[0][0], rows[0][1]) if rows else (0, None)

    def groups_started(self) -> int:
        return self._rows("SELECT COUNT(DISTINCT group_id) FROM trajectories")[0][0]

    def counts(self) -> dict[str, int]:
        return dict(self._rows("SELECT status, COUNT(*) FROM trajectories GROUP BY status"))

    def consumed_per_step(self) -> dict[str, list[int]]:
        """trajectory id -> the steps that consumed it (an id under two steps would be a double count)."""
        out: dict[str, list[int]] = {}
        for tid, step in self._rows("SELECT id, consumed_step FROM trajectories WHERE consumed_step IS NOT NULL"):
            out.setdefault(tid, []).append(step)
        return out

    def quarantined(self) -> list[dict[str, Any]]:
        rows = self._rows("SELECT task_id, domain, kind, attempts, message FROM quarantine ORDER BY created")
        return [dict(zip(("task_id", "domain", "kind", "attempts", "message"), r, strict=True)) for r in rows]

    def group_counts(self) -> dict[str, int]:
        """The run's counts so far, over all its processes (a resumed run included): groups by
        outcome, episodes, failed episodes and retries. Columns only, no trajectory is parsed (a
        metrics row reads them every step). Groups that a crash left in flight were dropped by
        `recover`, which recorded how many."""
        g = self._rows("SELECT COUNT(*), COALESCE(SUM(ok), 0), COALESCE(SUM(filtered), 0), COALESCE(SUM(stale), 0), "
                       "COALESCE(SUM(failed), 0) FROM (SELECT MAX(status IN ('complete', 'consumed', 'stale')) ok, "
                       "MAX(status = 'filtered') filtered, MAX(status = 'stale') stale, MIN(status = 'failed') failed "
                       "FROM trajectories GROUP BY group_id)")[0]
        dropped = self._rows("SELECT COALESCE(SUM(json_extract(data, '$.dropped_groups')), 0) FROM events "
                             "WHERE kind = 'recover'")[0][0]
        e = self._rows("SELECT COUNT(*), COALESCE(SUM(status = 'failed'), 0), COALESCE(SUM(attempts - 1), 0) "
                       "FROM trajectories WHERE status != 'in_flight'")[0]
        return {"groups_started": g[0] + dropped, "groups_completed": g[1], "groups_filtered": g[2],
                "groups_stale": g[3], "groups_failed": g[4], "groups_dropped_in_flight": dropped,
                "episodes": e[0], "failed_episodes": e[1], "retries": e[2]}

    def training_counts(self) -> dict[str, int]:
        """`group_counts`, the largest staleness trained on and the failed tries by kind."""
        staleness = self._rows("SELECT COALESCE(MAX(json_extract(metrics, '$.staleness_max')), 0) FROM steps")[0][0]
        kinds = self._rows("SELECT f.value, COUNT(*) FROM trajectories, "
                           "json_each(json_extract(data, '$.info.failed_tries')) f GROUP BY f.value ORDER BY 1")
        return {**self.group_counts(), "max_staleness_seen": int(staleness), **{f"failures_{k}": n for k, n in kinds}}

    # ---- resume ----------------------------------------------------------------------------
    def recover(self, committed_step: int) -> dict[str, int]:
        """After a crash: undo consumption marks of steps past the last committed checkpoint and
        drop in-flight rows (those episodes rerun). Returns what was undone."""
        with self._lock:
            undone = self._rows("SELECT COUNT(*) FROM trajectories WHERE consumed_step > ?", (committed_step,))[0][0]
            inflight, groups = self._rows("SELECT COUNT(*), COUNT(DISTINCT group_id) FROM trajectories "
                                          "WHERE status='in_flight'")[0]
            self._tx([
                ("INSERT INTO events VALUES (?, 'recover', ?)",  # the run's groups_started still counts them
                 (time.time(), json.dumps({"step": committed_step, "dropped_groups": groups}))),
                ("UPDATE trajectories SET status='complete', consumed_step=NULL WHERE consumed_step > ?",
                 (committed_step,)),
                ("DELETE FROM trajectories WHERE group_id IN (SELECT group_id FROM trajectories "
                 "WHERE status='in_flight')", ()),
                ("DELETE FROM steps WHERE step > ?", (committed_step,)),
                ("DELETE FROM replays WHERE step > ?", (committed_step,)),
            ])
        return {"unconsumed": int(undone), "dropped_in_flight": int(inflight)}
