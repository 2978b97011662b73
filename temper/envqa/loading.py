"""The tasks of a suite, one entry each; a malformed task folder becomes an entry with its error
(it gets the verdict `broken`) instead of stopping the run."""

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.envs.registry import parse_spec
from temper.envs.suite import Suite
from temper.envs.suites.terminal import TerminalSuite
from temper.envs.task import Task, content_hash
from temper.envs.taskfolder import find_task_folders
from temper.errors import TemperError


@dataclass
class Entry:
    id: str
    path: str  # the task folder, or `spec#index` for tasks that are not folders
    suite: Suite | None
    task: Task | None
    load_error: str | None = None
    waived: list[str] = field(default_factory=list)  # verdicts the task's author waived (task.toml [envqa])
    spec: str = ""  # a spec that rebuilds this task's suite (the manifest keeps it)

    @property
    def key(self) -> str:
        """Unique per entry: an exact copy of a task folder has the same content id, not the same path."""
        return f"{self.id}@{self.path}"

    @property
    def folder(self) -> Path | None:
        return Path(self.path) if self.task is None or "path" in self.task.payload else None


def _waivers(folder: Path) -> list[str]:
    """`[envqa] waive = ["sensitive-data"]` in task.toml: e.g. a task about e-mail addresses whose
    made-up addresses are its subject. Waived findings stay in the report; only the verdict goes."""
    try:
        table: Any = tomllib.loads((folder / "task.toml").read_text()).get("envqa", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    waive = table.get("waive", []) if isinstance(table, dict) else []
    return [str(w) for w in waive] if isinstance(waive, list) else []


def load_entries(spec: str, limit: int | None = None) -> tuple[Suite, list[Entry]]:
    """Build the suite (a bad spec is a TemperError: one line); terminal suites folder by folder."""
    suite = parse_spec(spec)
    if not isinstance(suite, TerminalSuite):
        tasks = suite.tasks()[:limit]
        return suite, [Entry(t.id, f"{spec}#{i}", suite, t, spec=spec) for i, t in enumerate(tasks)]
    entries = []
    for folder in find_task_folders(suite.root)[:limit]:
        # one suite per folder, of the suite's own kind (a web task verifies as the web suite does): a bad
        # folder fails alone
        images = "on" if suite.use_images else "off"
        sub = type(suite)(str(folder), images)
        sub.spec = f"{suite.name}:path={folder.resolve()}" + ("" if suite.use_images else ",images=off")
        try:
            (task,) = sub.tasks()
        except TemperError as exc:
            entries.append(Entry(content_hash("unloadable", str(folder)), str(folder), None, None, str(exc)))
            continue
        entries.append(Entry(task.id, str(folder), sub, task, waived=_waivers(folder), spec=sub.spec))
    return suite, entries
