"""Task folders in the Terminal-Bench 2 / Harbor layout, loaded and checked.

    instruction.md         what the agent is asked to do
    task.toml              [metadata] difficulty/category/tags, [agent] timeout_sec,
                           [verifier] timeout_sec, [environment] cpus/memory_mb/storage_mb
    environment/           its files become the workspace at /app (a Dockerfile there is NOT
                           executed; temper extension: environment/setup.sh runs in the sandbox
                           before the agent starts, e.g. to build a git history)
    solution/solve.sh      the oracle
    tests/test.sh          the verifier: writes /logs/verifier/reward.txt (or reward.json)

A malformed folder raises one TemperError line naming the folder and what is wrong.
"""

import hashlib
import logging
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.errors import TemperError

log = logging.getLogger(__name__)
NOT_IN_WORKSPACE = ("Dockerfile", "setup.sh")  # environment/ files that are not copied to /app
_TEXT_LIMIT = 64 << 10  # files kept as text for dedup/contamination checks


class TaskFolderError(TemperError):
    pass


@dataclass
class TaskFolder:
    path: Path
    instruction: str
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    agent_timeout_s: float = 600.0
    verifier_timeout_s: float = 120.0
    cpus: float = 1.0
    memory_mb: int = 1024
    storage_mb: int = 1024
    has_dockerfile: bool = False
    setup_script: str | None = None
    oracle: str = ""
    files: dict[str, str] = field(default_factory=dict)  # environment/ text files, for content checks
    digest: str = ""  # hash of every file of the folder

    @property
    def environment(self) -> Path:
        return self.path / "environment"

    def workspace(self) -> Path | None:
        """The folder that becomes /app: environment/ without Dockerfile and setup.sh (staged once)."""
        env = self.environment
        if not env.is_dir():
            return None
        if not any((env / n).exists() for n in NOT_IN_WORKSPACE):
            return env
        staged = Path(tempfile.gettempdir()) / "temper-task-workspaces" / self.digest
        if not staged.is_dir():
            tmp = staged.with_name(f"{staged.name}.{id(self)}.tmp")
            shutil.copytree(env, tmp, symlinks=True, ignore=shutil.ignore_patterns(*NOT_IN_WORKSPACE))
            try:
                tmp.rename(staged)
            except OSError:  # another process staged it first
                shutil.rmtree(tmp, ignore_errors=True)
        return staged


def _num(table: dict[str, Any], key: str, where: str, default: float) -> float:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        raise TaskFolderError(f"{where}.{key} must be a positive number, not {v!r}")
    return float(v)


def _digest(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts:
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def load_task_folder(path: Path | str) -> TaskFolder:
    folder = Path(path)
    name = str(folder)
    if not folder.is_dir():
        raise TaskFolderError(f"task folder {name}: not a folder")
    for rel in ("instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh"):
        if not (folder / rel).is_file():
            raise TaskFolderError(f"task folder {name}: missing {rel}")
    instruction = (folder / "instruction.md").read_text().strip()
    if not instruction:
        raise TaskFolderError(f"task folder {name}: instruction.md is empty")
    try:
        cfg = tomllib.loads((folder / "task.toml").read_text())
    except tomllib.TOMLDecodeError as exc:
        raise TaskFolderError(f"task folder {name}: task.toml is not valid TOML ({exc})") from None
    where = f"task folder {name}: task.toml"
    tables = {k: cfg.get(k, {}) for k in ("metadata", "agent", "verifier", "environment")}
    for k, t in tables.items():
        if not isinstance(t, dict):
            raise TaskFolderError(f"{where}: [{k}] must be a table")
    meta = tables["metadata"]
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise TaskFolderError(f"{where}: metadata.tags must be a list of strings")
    for key in ("difficulty", "category"):
        if key in meta and not isinstance(meta[key], str):
            raise TaskFolderError(f"{where}: metadata.{key} must be a string")
    env = tables["environment"]
    tf = TaskFolder(
        path=folder, instruction=instruction, difficulty=meta.get("difficulty"), category=meta.get("category"),
        tags=list(tags),
        agent_timeout_s=_num(tables["agent"], "timeout_sec", f"{where}: agent", 600.0),
        verifier_timeout_s=_num(tables["verifier"], "timeout_sec", f"{where}: verifier", 120.0),
        cpus=_num(env, "cpus", f"{where}: environment", 1.0),
        memory_mb=int(_num(env, "memory_mb", f"{where}: environment", 1024)),
        storage_mb=int(_num(env, "storage_mb", f"{where}: environment", 1024)),
        has_dockerfile=(folder / "environment" / "Dockerfile").is_file(),
        oracle=(folder / "solution" / "solve.sh").read_text(),
        digest=_digest(folder),
    )
    if (setup := folder / "environment" / "setup.sh").is_file():
        tf.setup_script = setup.read_text()
    if tf.has_dockerfile:
        log.warning("task folder %s: environment/Dockerfile is not executed (no container engine); "
                 "the workspace is environment/'s files", name)
    if tf.environment.is_dir():
        for p in sorted(tf.environment.rglob("*")):
            if p.is_file() and p.name not in NOT_IN_WORKSPACE and p.stat().st_size <= _TEXT_LIMIT:
                try:
                    tf.files[str(p.relative_to(tf.environment))] = p.read_text()
                except UnicodeDecodeError:
                    continue
    return tf


def find_task_folders(root: Path | str) -> list[Path]:
    """`root` itself when it is a task folder, else every task folder below it (sorted)."""
    root = Path(root)
    if not root.is_dir():
        raise TaskFolderError(f"task folder {root}: not a folder")
    if (root / "task.toml").exists() or (root / "instruction.md").exists():
        return [root]
    found = sorted(p.parent for p in root.rglob("task.toml") if "environment" not in p.relative_to(root).parts)
    if not found:
        raise TaskFolderError(f"task folder {root}: no task folders (with a task.toml) under it")
    return found
