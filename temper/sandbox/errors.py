"""Sandbox errors. User-input problems are TemperErrors (one line, naming the thing at fault)."""

from temper.errors import TemperError


class SandboxError(TemperError):
    """A sandbox could not do what was asked (bad path, missing folder, isolation unavailable)."""


class PathEscapeError(SandboxError):
    """A file path that would leave the sandbox's writable folders (`..`, absolute, symlink)."""


class IsolationUnavailable(SandboxError):
    """The requested isolation mode cannot run on this host."""


class SandboxCrashed(SandboxError):
    """The sandbox's supervisor died or stopped answering: an infrastructure failure, not a reward."""

    exit_code = 3
