"""Task folders in the Terminal-Bench 2 / Harbor layout, loaded and checked.

    instruction.md         what the agent is asked to do
    task.toml              [metadata] difficulty/category/tags, [agent] timeout_sec,
                           [verifier] timeout_sec, [environment] cpus/memory_mb/storage_mb
    environment/           its Dockerfile, if any, builds the task's image (the terminal suite's
                           images=on); without one its files become the workspace at /app
                           (temper extension: environment/setup.sh runs in the sandbox before
                           the agent starts, e.g. to build a git history)
    solution/solve.sh      the oracle
    tests/test.sh          the verifier: writes /logs/verifier/reward.txt (or reward.json)

A malformed folder raises one TemperError line naming the folder and what is wrong. Task folders
come from strangers: the loader follows no link (instruction.md, task.toml, environment/, tests/,
solution/ and their files must not be links; a link inside environment/ must stay inside the folder
and is never read), hashes in chunks, refuses a folder above `TaskMaxima.folder_mb`, and clamps
task.toml's resources and timeouts to the operator's `TaskMaxima` (refusing absurd values).
"""

import hashlib
import logging
import os
import posixpath
import shutil
import stat
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temper.errors import TemperError
from temper.sandbox.config import TaskMaxima

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
    tools: list[str] = field(default_factory=list)  # [metadata] tools: the external programs the task expects used
    agent_timeout_s: float = 600.0
    verifier_timeout_s: float = 120.0
    cpus: float = 1.0
    memory_mb: int = 1024
    storage_mb: int = 1024
    has_dockerfile: bool = False
    allow_internet: bool = False  # [environment] allow_internet, as the operator's TaskMaxima.internet allows
    setup_script: str | None = None
    oracle: str = ""
    test_script: str = ""  # tests/test.sh, as loaded: the verifier runs this text, not the sandbox's copy
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


def _num(table: dict[str, Any], key: str, where: str, default: float, maxima: TaskMaxima, field: str) -> float:
    """task.toml's `key`: a positive number, clamped to the operator's maximum; absurd (above
    `absurd_factor` times the larger of that maximum and its default) is refused."""
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not v > 0 or v == float("inf"):
        raise TaskFolderError(f"{where}.{key} must be a positive number, not {v!r}")
    most = getattr(maxima, field)
    if v > max(most, TaskMaxima.model_fields[field].default) * maxima.absurd_factor:
        raise TaskFolderError(f"{where}.{key} = {v!r} is absurd (the operator's maximum is {most:g})")
    if v > most:
        log.warning("%s.%s = %r clamped to the operator's maximum %g", where, key, v, most)
    return float(min(v, most))


_NAMED = ("instruction.md", "task.toml", "environment", "tests", "solution")


def _walk(folder: Path, limit: int) -> list[tuple[str, os.stat_result]]:
    """Every entry under `folder` (relative path, lstat), links not followed; refuses a link among the
    named entries, a link whose target leaves the folder, and a folder above `limit` bytes."""
    name = str(folder)
    for rel in _NAMED:
        try:
            st = os.lstat(folder / rel)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            raise TaskFolderError(f"task folder {name}: {rel} is a link (task folders must not link out)")
    out: list[tuple[str, os.stat_result]] = []
    total = 0
    for top, dirs, files in os.walk(folder, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for entry in sorted(dirs + files):
            p = Path(top) / entry
            rel = str(p.relative_to(folder))
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(p)
                inside = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
                if os.path.isabs(target) or inside == ".." or inside.startswith("../"):
                    raise TaskFolderError(f"task folder {name}: {rel} is a link to {target}, outside the folder")
                if rel.split("/", 1)[0] != "environment" or "/" not in rel:
                    raise TaskFolderError(f"task folder {name}: {rel} is a link (only environment/ may hold links)")
            elif not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                raise TaskFolderError(f"task folder {name}: {rel} is not a file, folder or link")
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > limit:
                    raise TaskFolderError(f"task folder {name}: larger than {limit >> 20} MiB (at {rel})")
            if rel not in ("__pycache__",):
                out.append((rel, st))
    return out


def _read(folder: Path, rel: str, limit: int | None = None) -> bytes:
    """A regular file of the folder, opened without following a link at any level below the folder."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        parts = rel.split("/")
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        try:
            f = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            raise TaskFolderError(f"task folder {folder}: cannot open {rel} ({exc.strerror})") from None
        with os.fdopen(f, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                raise TaskFolderError(f"task folder {folder}: {rel} is not a regular file")
            return fh.read(limit) if limit is not None else fh.read()
    finally:
        os.close(fd)


def _text(folder: Path, rel: str) -> str:
    try:
        return _read(folder, rel).decode()
    except UnicodeDecodeError:
        raise TaskFolderError(f"task folder {folder}: {rel} is not UTF-8 text") from None


def _digest(folder: Path, entries: list[tuple[str, os.stat_result]]) -> str:
    """A hash of every file (and link target) of the folder, read in chunks."""
    h = hashlib.sha256()
    for rel, st in entries:
        if "__pycache__" in rel.split("/"):
            continue
        if stat.S_ISLNK(st.st_mode):
            h.update(rel.encode() + b"\0->" + os.readlink(folder / rel).encode() + b"\0")
        elif stat.S_ISREG(st.st_mode):
            h.update(rel.encode() + b"\0")
            fd = os.open(folder / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
            h.update(b"\0")
    return h.hexdigest()[:16]


def folder_files(folder: Path, max_file_bytes: int, maxima: TaskMaxima | None = None) -> dict[str, bytes]:
    """The folder's regular files of at most `max_file_bytes` (relative path -> bytes), found and read as the
    loader does: no link followed, the same refusals (TaskFolderError)."""
    entries = _walk(folder, (maxima or TaskMaxima()).folder_mb << 20)
    return {rel: _read(folder, rel) for rel, st in entries
            if stat.S_ISREG(st.st_mode) and st.st_size <= max_file_bytes and "__pycache__" not in rel.split("/")}


def load_task_folder(path: Path | str, maxima: TaskMaxima | None = None) -> TaskFolder:
    folder = Path(path)
    name = str(folder)
    most = maxima or TaskMaxima()
    if not folder.is_dir():
        raise TaskFolderError(f"task folder {name}: not a folder")
    entries = _walk(folder, most.folder_mb << 20)
    kinds = {rel: st for rel, st in entries}
    for rel in ("instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh"):
        st = kinds.get(rel)
        if st is None:
            raise TaskFolderError(f"task folder {name}: missing {rel}")
        if not stat.S_ISREG(st.st_mode):
            raise TaskFolderError(f"task folder {name}: {rel} is not a regular file")
    instruction = _text(folder, "instruction.md").strip()
    if not instruction:
        raise TaskFolderError(f"task folder {name}: instruction.md is empty")
    try:
        cfg = tomllib.loads(_text(folder, "task.toml"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskFolderError(f"task folder {name}: task.toml is not valid TOML ({exc})") from None
    where = f"task folder {name}: task.toml"
    tables = {k: cfg.get(k, {}) for k in ("metadata", "agent", "verifier", "environment")}
    for k, t in tables.items():
        if not isinstance(t, dict):
            raise TaskFolderError(f"{where}: [{k}] must be a table")
    meta = tables["metadata"]
    for key in ("tags", "tools"):
        listed = meta.get(key, [])
        if not isinstance(listed, list) or not all(isinstance(t, str) and t for t in listed):
            raise TaskFolderError(f"{where}: metadata.{key} must be a list of strings")
    for key in ("difficulty", "category"):
        if key in meta and not isinstance(meta[key], str):
            raise TaskFolderError(f"{where}: metadata.{key} must be a string")
    env = tables["environment"]
    tf = TaskFolder(
        path=folder, instruction=instruction, difficulty=meta.get("difficulty"), category=meta.get("category"),
        tags=list(meta.get("tags", [])), tools=list(meta.get("tools", [])),
        agent_timeout_s=_num(tables["agent"], "timeout_sec", f"{where}: agent", 600.0, most, "agent_timeout_s"),
        verifier_timeout_s=_num(tables["verifier"], "timeout_sec", f"{where}: verifier", 120.0, most,
                                "verifier_timeout_s"),
        cpus=_num(env, "cpus", f"{where}: environment", 1.0, most, "cpus"),
        memory_mb=int(_num(env, "memory_mb", f"{where}: environment", 1024, most, "memory_mb")),
        storage_mb=int(_num(env, "storage_mb", f"{where}: environment", 1024, most, "storage_mb")),
        has_dockerfile="environment/Dockerfile" in kinds,
        allow_internet=_flag(env, "allow_internet", f"{where}: environment") and most.internet,
        oracle=_text(folder, "solution/solve.sh"),
        test_script=_text(folder, "tests/test.sh"),
        digest=_digest(folder, entries),
    )
    if stat.S_ISREG(getattr(kinds.get("environment/setup.sh"), "st_mode", 0)):
        tf.setup_script = _text(folder, "environment/setup.sh")
    for rel, st in entries:
        if (rel.startswith("environment/") and stat.S_ISREG(st.st_mode) and st.st_size <= _TEXT_LIMIT
                and rel.count("/") >= 1 and rel.removeprefix("environment/") not in NOT_IN_WORKSPACE):
            try:
                tf.files[rel.removeprefix("environment/")] = _read(folder, rel).decode()
            except UnicodeDecodeError:
                continue
    return tf


def _flag(table: dict[str, Any], key: str, where: str) -> bool:
    value = table.get(key, False)
    if not isinstance(value, bool):
        raise TaskFolderError(f"{where}.{key} must be true or false, not {value!r}")
    return value


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
