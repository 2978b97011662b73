"""What a command run in a sandbox returns."""

import re
from dataclasses import dataclass
from typing import Literal

# "interrupted": not a limit but the host's `Sandbox.interrupt` (e.g. the program that asked for it has exited)
LimitName = Literal["wall_time", "cpu", "memory", "processes", "file_size", "output", "disk", "interrupted"]


@dataclass(frozen=True)
class ExecResult:
    """exit_code is the process's status (negative: killed by that signal), as in subprocess."""

    exit_code: int
    stdout: bytes
    stderr: bytes
    duration_s: float
    limit: LimitName | None = None  # the limit that stopped or cut the command, if any
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    cpu_s: float = 0.0
    peak_rss_kb: int = 0  # the largest resident set of the command and the children it waited for (wait4)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.limit is None

    @property
    def text(self) -> str:
        """stdout decoded (invalid bytes replaced), for agents that read observations as text."""
        return self.stdout.decode(errors="replace")


@dataclass(frozen=True)
class FileEntry:
    path: str  # relative to the folder listed
    type: Literal["file", "dir", "symlink"]
    size: int


class FileList(list[FileEntry]):
    """What `list_files` returns: the entries, and `truncated` when the folder held more than one
    reply carries (names of about 4 MiB in all); list a sub-folder to see the rest."""

    def __init__(self, entries: list[FileEntry], truncated: bool = False):
        super().__init__(entries)
        self.truncated = truncated


_ESCAPES = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]|\x1b[=>]")


@dataclass(frozen=True)
class ShellOutput:
    """What the sandbox's interactive shell printed since the last call (`Sandbox.shell`)."""

    raw: bytes  # as the terminal gave it (escape sequences, carriage returns)
    started: bool  # this call started the shell (the first, or the last one had exited)
    alive: bool  # the shell is still running

    @property
    def text(self) -> str:
        """The output as text: terminal escape sequences and carriage returns removed."""
        return _ESCAPES.sub(b"", self.raw).replace(b"\r\n", b"\n").replace(b"\r", b"").decode(errors="replace")
