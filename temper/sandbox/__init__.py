"""Sandboxes: isolated, fast execution of agent code and commands, with an audit log.

See docs/sandbox.md. Imports nothing of temper but temper.config and temper.errors.
"""

from temper.sandbox.aio import AsyncSandbox, AsyncSandboxPool
from temper.sandbox.audit import AuditLog, verify
from temper.sandbox.config import ImageRoot, Limits, Mount, SandboxConfig
from temper.sandbox.errors import IsolationUnavailable, PathEscapeError, SandboxCrashed, SandboxError
from temper.sandbox.pool import SandboxPool
from temper.sandbox.result import ExecResult, FileEntry
from temper.sandbox.sandbox import Sandbox

__all__ = [
    "AsyncSandbox", "AsyncSandboxPool", "AuditLog", "ExecResult", "FileEntry", "ImageRoot", "IsolationUnavailable",
    "Limits", "Mount", "PathEscapeError", "Sandbox", "SandboxConfig", "SandboxCrashed", "SandboxError", "SandboxPool",
    "verify",
]
