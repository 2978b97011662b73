"""The one place envs touch the sandbox package: crash detection (more to come with the pool)."""

from temper.sandbox.errors import SandboxCrashed


def is_sandbox_crash(exc: BaseException) -> bool:
    """A sandbox whose supervisor died or stopped answering: an infrastructure failure."""
    return isinstance(exc, SandboxCrashed)
