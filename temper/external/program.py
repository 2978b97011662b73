"""Run an agent program for one episode: its own process group, a wall-clock and a memory limit,
output to files (never a pipe it could block on), the whole group killed when it ends or times out."""

import asyncio
import contextlib
import os
import resource
import signal
import time
from dataclasses import dataclass
from pathlib import Path

TAIL = 4000  # characters of stdout and stderr kept with the episode


@dataclass
class ProgramResult:
    exit_code: int | None  # None: killed at the timeout
    timed_out: bool
    duration_s: float
    stdout: str  # the last TAIL characters
    stderr: str

    def describe(self) -> str:
        how = "timed out" if self.timed_out else f"exited with code {self.exit_code}"
        tail = self.stderr.strip().splitlines()[-3:] or self.stdout.strip().splitlines()[-3:]
        return f"{how}" + (f"; last output: {' | '.join(tail)}" if tail else "")


async def run_program(argv: list[str], env: dict[str, str], workdir: Path, timeout_s: float,
                      memory_mb: int) -> ProgramResult:
    """Run `argv` from the current directory (relative paths in it mean what they meant to the user);
    its output goes to `workdir`, the episode's scratch folder (TEMPER_WORKDIR)."""
    out_path, err_path = workdir / "stdout.txt", workdir / "stderr.txt"
    limit = memory_mb * 1024 * 1024

    def limits() -> None:  # in the child, before exec
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    start = time.monotonic()
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        try:
            proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=out,
                                                        stderr=err, env={**env, "TEMPER_WORKDIR": str(workdir)},
                                                        start_new_session=True,
                                                        preexec_fn=limits)
        except OSError as exc:  # not found, not executable: the program never ran
            return ProgramResult(127, False, 0.0, "", f"cannot start {argv[0]!r}: {exc}")
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout_s)
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)  # whatever it left running (or all of it, at the timeout)
            if proc.returncode is None:
                await proc.wait()
    return ProgramResult(None if timed_out else proc.returncode, timed_out, time.monotonic() - start,
                         _tail(out_path), _tail(err_path))


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(max(0, path.stat().st_size - TAIL))
        return f.read().decode(errors="replace")
