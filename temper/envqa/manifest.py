"""The filtered suite manifest, and the `manifest:path=DIR/manifest.json` suite that loads it.

The manifest keeps the tasks that passed every check (`ok`) and, when the policy ran, are
`learnable`: reproducible, deduplicated, uncontaminated, with a reward signal. Each task is kept
with a spec that rebuilds its suite and its pass rate, so `temper train` can use it as its task
source and seed its curriculum's difficulty pools (`ManifestSuite.pass_rates()`).

The suite is registered under the `temper.suites` entry-point group (pyproject.toml) and, once
this module is imported, in-process too.
"""

import json
from pathlib import Path
from typing import Any

from temper.envqa.config import EnvQAConfig
from temper.envqa.loading import Entry
from temper.envs.env import Environment
from temper.envs.registry import parse_spec, register_suite
from temper.envs.suite import Suite
from temper.envs.task import Task
from temper.errors import TemperError


def selected(rec: dict[str, Any], policy: bool) -> bool:
    return "ok" in rec["verdicts"] and (not policy or "learnable" in rec["verdicts"])


def write_manifest(out: Path, cfg: EnvQAConfig, records: list[dict[str, Any]], entries: list[Entry]) -> Path:
    tasks = []
    for rec in records:
        if not selected(rec, cfg.policy):
            continue
        pol = rec["checks"].get("policy") or {}
        tasks.append({"id": rec["id"], "path": rec["path"], "spec": rec["spec"], "pass_rate": pol.get("pass_rate"),
                      "passes": pol.get("passes"), "samples": pol.get("samples")})
    manifest = {"version": 1, "source": cfg.suite, "model": cfg.model if cfg.policy else None,
                "checked": len(records), "tasks": tasks}
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


@register_suite("manifest")
class ManifestSuite(Suite):
    """The tasks of an envqa manifest, each run by the suite it came from."""

    name = "manifest"

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        if self.path.is_dir():
            self.path = self.path / "manifest.json"
        try:
            self.manifest = json.loads(self.path.read_text())
            rows = self.manifest["tasks"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise TemperError(f"manifest {self.path}: not an envqa manifest ({type(exc).__name__}: {exc})") from None
        self._suites: dict[str, Suite] = {}
        by_id: dict[str, dict[str, Task]] = {}  # spec -> its tasks by id: one lookup a row, not a scan
        self._tasks: list[Task] = []
        self._owner: dict[str, Suite] = {}
        self.rows = {r["id"]: r for r in rows}
        for row in rows:
            spec = row["spec"]
            if spec not in self._suites:
                self._suites[spec] = parse_spec(spec)
                by_id[spec] = {t.id: t for t in reversed(self._suites[spec].tasks())}  # the first of equal ids wins
            suite = self._suites[spec]
            task = by_id[spec].get(row["id"])
            if task is None:
                raise TemperError(f"manifest {self.path}: task {row['id']} ({row['path']}) is no longer in {spec} "
                                  "(changed since it was checked? rerun temper envqa)")
            self._tasks.append(task)
            self._owner[task.id] = suite
        self.needs_sandbox = any(s.needs_sandbox for s in self._suites.values())

    def tasks(self) -> list[Task]:
        return self._tasks

    def make_env(self, task: Task, pool: Any = None) -> Environment:
        return self._owner[task.id].make_env(task, pool)

    def pass_rates(self) -> dict[str, tuple[int, int]]:
        """task id -> (passes, samples) measured by envqa (tasks checked without the policy are absent)."""
        return {i: (r["passes"], r["samples"]) for i, r in self.rows.items() if r.get("samples")}
