"""Sandbox errors. User-input problems are TemperErrors (one line, naming the thing at fault)."""

from temper.errors import TemperError


class SandboxError(TemperError):
    """A sandbox could not do what was asked (bad path, missing folder, isolation unavailable).
    `errno` is the supervisor's, when it refused a request (e.g. ENOENT: no such file)."""

    def __init__(self, message: str, errno: int = 0):
        super().__init__(message)
        self.errno = errno

    def __reduce__(self) -> tuple:  # keep the fields across processes (Ray workers)
        return type(self), (str(self), self.errno)


class PathEscapeError(SandboxError):
    """A file path that would leave the sandbox's writable folders (`..`, absolute, symlink)."""


class IsolationUnavailable(SandboxError):
    """The requested isolation mode cannot run on this host."""


class SandboxCrashed(SandboxError):
    """The sandbox's supervisor died or stopped answering.

    `by_agent` says who broke it. True: what runs or lies in the sandbox did (an OOM kill in its own
    cgroup, a supervisor that stopped answering or sent a reply it may not, a signal its commands
    could send it): the agent's doing, scored like any failed attempt. False: something outside
    the sandbox's reach (the host closed or killed it, a death between calls, a failed start): an
    infrastructure failure, masked out."""

    exit_code = 3

    def __init__(self, message: str, by_agent: bool = False):
        super().__init__(message)
        self.by_agent = by_agent

    def __reduce__(self) -> tuple:
        return type(self), (str(self), self.by_agent)
