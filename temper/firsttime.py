"""First-time work that is safe to interrupt at any instant: an owner lock and an atomic build.

temper builds a few things once per machine (the C++ kernels, converted models, staged sandbox
templates, the sandbox Python, .venv-vllm). A process killed half-way (Ctrl-C, OOM, CI timeout)
must never leave a lock that wedges later runs, nor a half-written artefact that a later run uses.

- `OwnerLock`: an flock on `<artefact>.lock`. The kernel drops an flock when its holder dies, so a
  dead owner never wedges anyone; the file also records the owner (pid, host, start time) for the
  waiter's messages, and a record left behind says its owner died: the next holder logs one line
  that it takes over. A waiter says what it waits for, and gives up after `TEMPER_LOCK_TIMEOUT_S`
  (default 900 s) with one TemperError naming the artefact and the owner.
- `build_once`: build a folder into `.tmp-<name>-*` beside it under the lock, write a completion
  marker last, rename it into place. A folder without the marker is never used: it is rebuilt.

A leaf: it imports only the standard library and temper.errors, so every layer (and setup scripts,
through `python -m temper.firsttime`) may use it.
"""

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from temper.errors import TemperError

log = logging.getLogger(__name__)
MARKER = ".temper-complete"  # written last into a built folder: its presence means the build finished
PAUSE_ENV = "TEMPER_TEST_PAUSE_AT"  # tests: a step named here stops (holding its lock) until killed


def temper_home() -> Path:
    """Where temper caches what it builds once per machine (converted models, task images): $TEMPER_HOME."""
    return Path(os.environ.get("TEMPER_HOME") or Path.home() / ".cache" / "temper")


def _boot_ticks(pid: int) -> int | None:
    """The process's start time in clock ticks since boot: with the pid, it names one process (pids recycle)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])  # field 22; the name in () may hold spaces


@dataclass(frozen=True)
class Owner:
    pid: int
    host: str
    ticks: int | None  # start time since boot (identity)
    since: float  # when it took the lock (wall clock, for people)

    @classmethod
    def me(cls) -> "Owner":
        return cls(os.getpid(), socket.gethostname(), _boot_ticks(os.getpid()), time.time())

    @classmethod
    def parse(cls, text: str) -> "Owner | None":
        try:
            return cls(**json.loads(text))
        except (ValueError, TypeError):
            return None

    def alive(self) -> bool:
        """False only when sure: on another host it cannot be told, so it counts as alive."""
        if self.host != socket.gethostname():
            return True
        ticks = _boot_ticks(self.pid)
        return ticks is not None and ticks == self.ticks

    def __str__(self) -> str:
        return (f"pid {self.pid} on {self.host}, since {time.strftime('%H:%M:%S', time.localtime(self.since))}"
                f" ({time.time() - self.since:.0f} s ago)")


def read_owner(lock: Path) -> Owner | None:
    """The owner recorded in a lock file (None: no file, free, or unreadable)."""
    try:
        return Owner.parse(lock.read_text())
    except OSError:
        return None


def is_held(lock: Path) -> bool:
    """Does a live process hold this lock now? (tries it without waiting)"""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def record_owner(fd: int) -> None:
    """Write this process as the owner into a lock file it holds (for waiters' messages, `temper doctor`)."""
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(asdict(Owner.me())).encode(), 0)


def lock_timeout() -> float:
    return float(os.environ.get("TEMPER_LOCK_TIMEOUT_S") or 900)


def pause_point(step: str) -> None:
    """Tests only: with TEMPER_TEST_PAUSE_AT=step, say so on stderr and wait to be killed here."""
    if os.environ.get(PAUSE_ENV) == step:
        print(f"temper: paused at {step} (pid {os.getpid()})", file=sys.stderr, flush=True)
        while True:
            time.sleep(60)


class OwnerLock:
    """An exclusive lock on `path` for `what` (named in every message), held by one process at a time."""

    def __init__(self, path: Path, what: str, timeout: float | None = None, progress_s: float = 10.0):
        self.path, self.what, self.progress_s = Path(path), what, progress_s
        self.timeout = lock_timeout() if timeout is None else timeout
        self._fd: int | None = None

    def __enter__(self) -> "OwnerLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # CLOEXEC: a compiler child
        start = note = time.monotonic()                                       # must not keep it after us
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    pass
                now = time.monotonic()
                owner = read_owner(self.path)
                if now - start >= self.timeout:
                    raise TemperError(f"{self.what}: gave up after {self.timeout:.0f} s waiting for {self.path}, "
                                      f"held by {owner or 'an unknown process'} (TEMPER_LOCK_TIMEOUT_S sets the wait; "
                                      "`temper doctor` reports it)")
                if now >= note:
                    note = now + self.progress_s
                    log.warning("temper: waiting for %s: %s is held by %s", self.what, self.path,
                                owner or "another process")
                time.sleep(0.1)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        stale = Owner.parse(os.pread(fd, 4096, 0).decode(errors="replace"))
        if stale is not None:  # its holder died without releasing (a clean release empties the record)
            log.warning("temper: %s: taking over %s from %s, which is gone", self.what, self.path, stale)
        record_owner(fd)
        return self

    def fileno(self) -> int:
        assert self._fd is not None
        return self._fd

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)  # empty: a clean release; the file stays (unlinking races a waiter)
            os.close(self._fd)
            self._fd = None


def complete(folder: Path, stamp: str = "") -> bool:
    """Did a build of `folder` finish (its marker written last), for this `stamp` (what it was built from)?"""
    try:
        return (folder / MARKER).read_text() == stamp
    except OSError:
        return False


def leftovers(folder: Path) -> list[Path]:
    """Temporary and replaced copies of `folder` that a killed build left beside it."""
    return sorted(p for p in folder.parent.glob(f".*-{folder.name}-*") if p.name.startswith((".tmp-", ".old-")))


def interrupted_builds(parent: Path, lock_of: Callable[[str], Path] | None = None) -> list[Path]:
    """`build_once`'s temporary and replaced folders under `parent` whose lock no one holds: a killed
    build's leftovers (its folder's next build removes them too). `lock_of(name)`: the lock of `name`."""
    found = []
    for path in sorted(parent.glob(".*-*-*")) if parent.is_dir() else []:
        if path.name.startswith((".tmp-", ".old-")):
            name = path.name.split("-", 1)[1].rsplit("-", 1)[0]
            if not is_held(lock_of(name) if lock_of else parent / f"{name}.lock"):
                found.append(path)
    return found


def remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def build_once(folder: Path, what: str, build: Callable[[Path], None], stamp: str = "", *, marker: bool = True,
               lock: Path | None = None, timeout: float | None = None) -> Path:
    """`folder`, built by `build(tmp)` unless a complete build for `stamp` is there; safe against kills
    (the last step is one rename) and against other processes (they wait on the lock, then find it built).
    `marker=False`: the folder's existence is its completion (only a rename makes it; no file is added to
    it, e.g. a template a sandbox sees). `lock` defaults to `<folder>.lock`."""
    def done() -> bool:
        return complete(folder, stamp) if marker else folder.is_dir()

    if done():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    with OwnerLock(lock or folder.with_name(folder.name + ".lock"), what, timeout):
        if done():  # built by the process we waited for
            return folder
        for old in leftovers(folder):  # we hold the lock: these are a dead builder's
            log.info("temper: %s: removing %s, left by an interrupted build", what, old)
            remove(old)
        if folder.exists():
            log.info("temper: %s: rebuilding %s (%s)", what, folder,
                     "stale" if (folder / MARKER).exists() else "no completion marker: an interrupted build")
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}-", dir=folder.parent))
        try:
            tmp.chmod(0o755)  # mkdtemp's 0700 guards a shared /tmp; this is a cache others may read
            build(tmp)
            pause_point(what)
            if marker:
                (tmp / MARKER).write_text(stamp)
            if folder.exists():
                old = folder.with_name(f".old-{folder.name}-{os.getpid()}")
                folder.rename(old)
                remove(old)
            tmp.rename(folder)
        except BaseException:
            remove(tmp)
            raise
    return folder


def write_owner(path: Path) -> None:
    """Record this process as the owner of per-run state at `path` (`.<name>.owner` beside it), before
    making it: state whose owner is gone is a crashed run's leftover (`owner_gone`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.owner.{os.getpid()}")
    tmp.write_text(json.dumps(asdict(Owner.me())))
    os.replace(tmp, owner_file(path))


def owner_file(path: Path) -> Path:
    return path.with_name(f".{path.name}.owner")


def drop_owner(path: Path) -> None:
    with contextlib.suppress(OSError):
        owner_file(path).unlink()


def stale(path: Path) -> tuple[bool, Owner | None]:
    """Is `path` a crashed run's leftover (no owner recorded, or a dead one)? And its recorded owner."""
    owner = read_owner(owner_file(path))
    return owner is None or not owner.alive(), owner


def main(argv: list[str]) -> int:
    """`python -m temper.firsttime LOCK WHAT -- CMD...`: CMD under the lock (for setup scripts)."""
    if len(argv) < 4 or argv[2] != "--":
        print("usage: python -m temper.firsttime LOCK WHAT -- CMD...", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        with OwnerLock(Path(argv[0]), argv[1]) as lock:
            pause_point(argv[1])
            # CMD inherits the lock too: were we killed, it stays held while CMD still works
            return subprocess.call(argv[3:], pass_fds=[lock.fileno()])
    except TemperError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
