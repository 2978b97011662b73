"""The built-in tools. All but `submit` act on the episode's sandbox; the workspace is the
working directory, so relative paths are in /app for terminal tasks."""

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from temper.agent.tools.base import Tool, ToolContext, ToolError, tool
from temper.envs.sandboxes import is_sandbox_crash
from temper.sandbox.aio import call
from temper.trajectory import SCREENSHOT_BYTES

MAX_TIMEOUT_S = 600.0
T = TypeVar("T")


def command_timeout(asked: float, cap: float | None, deadline: float | None) -> float:
    """A sandbox command's timeout: what was asked, at most `cap` and what is left before `deadline`
    (time.monotonic()). The sandbox kills the command at it, so no command outlives the call that ran
    it or the episode: nothing of the agent's is left holding the sandbox when its verifier runs."""
    limit = min(MAX_TIMEOUT_S, cap if cap is not None else MAX_TIMEOUT_S)
    if deadline is not None:
        limit = min(limit, deadline - time.monotonic())
    return max(1.0, min(float(asked), limit))


async def tracked_call(pending: set[Any], fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """A sandbox call kept in `pending` until it returns, even when its caller is cancelled (a tool's or the
    episode's timeout: the sandbox goes on running it), so that `settle` can wait for it."""
    fut = asyncio.ensure_future(call(fn, *args, **kwargs))
    pending.add(fut)
    fut.add_done_callback(pending.discard)
    return await asyncio.shield(fut)


async def settle(pending: set[Any]) -> BaseException | None:
    """Wait for the sandbox calls still running (each ends by its command's timeout); the first sandbox
    crash among them, if any."""
    crash = None
    while pending:
        for out in await asyncio.gather(*list(pending), return_exceptions=True):
            if crash is None and isinstance(out, BaseException) and is_sandbox_crash(out):
                crash = out
    return crash


def format_exec(r: Any) -> str:
    out = r.stdout.decode(errors="replace")
    err = r.stderr.decode(errors="replace")
    head = f"exit code {r.exit_code}"
    if r.limit:
        head += f" (stopped: {r.limit.replace('_', ' ')} limit)"
    parts = [head]
    if out:
        parts.append(out.rstrip("\n"))
    if err:
        parts.append("[stderr]\n" + err.rstrip("\n"))
    return "\n".join(parts)


async def _exec(ctx: ToolContext, cmd: Any, stdin: str | None, timeout: float) -> str:
    sb = ctx.sandbox
    timeout = command_timeout(timeout, ctx.timeout_s, ctx.deadline)
    return format_exec(await tracked_call(ctx.pending, sb.exec, cmd, stdin=stdin, timeout=timeout))


@tool
async def bash(ctx: ToolContext, command: str, timeout: float = 60) -> str:
    """Run a bash command in the sandbox and return its exit code, stdout and stderr.

    Args:
        command: the command line, run with bash -c in the working directory
        timeout: seconds before the command is killed
    """
    return await _exec(ctx, command, None, timeout)


@tool
async def python(ctx: ToolContext, code: str, timeout: float = 60) -> str:
    """Run a Python 3 program in the sandbox and return its exit code, stdout and stderr. Print what you need to see.

    Args:
        code: the program's source
        timeout: seconds before it is killed
    """
    return await _exec(ctx, ["python3", "-"], code, timeout)


@tool
async def shell(ctx: ToolContext, keys: str = "", wait: float = 2.0) -> str:
    """Type into the sandbox's interactive shell and return what it printed since your last call. The shell is
    one session for the whole task: its working directory, variables and background jobs persist between calls.

    Args:
        keys: what to type; end a command with a newline to run it; C-c alone interrupts the running command;
            empty: only read what was printed meanwhile
        wait: seconds to wait for output (it returns earlier once the output stops)
    """
    typed = "\x03" if keys.strip() == "C-c" else keys
    wait = command_timeout(wait, ctx.timeout_s, ctx.deadline)
    try:
        out = await tracked_call(ctx.pending, ctx.sandbox.shell, typed, wait_s=wait)
    except ToolError:
        raise
    except Exception as exc:
        _reraise_crash(exc)
        raise ToolError(f"the shell is unavailable: {exc}") from None
    text = out.text if len(out.text) <= 16000 else "(earlier output cut)\n" + out.text[-16000:]
    return text + ("" if out.alive else "\n(the shell exited; the next call starts a new one)")


RENDER_PROGRAM = (Path(__file__).with_name("render_page.py")).read_text()
RENDER_WIDTHS = (240, 3840)  # the browser window widths `render` accepts, in pixels


@dataclass
class Rendered:
    exit_code: int  # render_page.py's
    text: str  # what a text-only model reads: format_exec of render_page.py (title, console errors, boxes)
    png: bytes | None  # the screenshot; None if none was taken (or it is over SCREENSHOT_BYTES)


async def render_page(sandbox: Any, pending: set[Any], page: str, width: int, timeout: float) -> Rendered:
    """Render `page` of the site in the sandbox's headless Chromium (a web task's image)."""
    if not RENDER_WIDTHS[0] <= int(width) <= RENDER_WIDTHS[1]:
        raise ToolError(f"width: {width} is outside {RENDER_WIDTHS[0]}..{RENDER_WIDTHS[1]} pixels")
    shot = f"/tmp/render-{int(width)}.png"
    argv = ["python3", "-", page, str(int(width)), shot]
    r = await tracked_call(pending, sandbox.exec, argv, stdin=RENDER_PROGRAM, timeout=timeout)
    png = None
    if r.exit_code == 0:
        try:
            png = await tracked_call(pending, sandbox.read_file, shot, SCREENSHOT_BYTES + 1)
        except Exception as exc:
            _reraise_crash(exc)
        png = png if png and png.startswith(b"\x89PNG") and len(png) <= SCREENSHOT_BYTES else None
    return Rendered(r.exit_code, format_exec(r), png)


@tool
async def render(ctx: ToolContext, page: str = "index.html", width: int = 1200) -> str:
    """Open a page of your site in the sandbox's headless Chromium (web tasks) and describe what renders: its title,
    console errors and the visible elements with their positions and sizes. Use it to check your work.

    Args:
        page: the page's path relative to the working directory (served as the site's root)
        width: the browser window's width in pixels
    """
    # The models temper's engine runs read text: the description is the observation (an external program
    # gets the screenshot too, from the episode endpoint's /render).
    shown = await render_page(ctx.sandbox, ctx.pending, page, width, command_timeout(60, ctx.timeout_s, ctx.deadline))
    return shown.text


@tool
async def read_file(ctx: ToolContext, path: str) -> str:
    """Read a text file from the sandbox.

    Args:
        path: a path relative to the working directory, or absolute
    """
    try:
        data = await tracked_call(ctx.pending, ctx.sandbox.read_file, path)
    except ToolError:
        raise
    except Exception as exc:
        _reraise_crash(exc)
        raise ToolError(f"cannot read {path}: {exc}") from None
    return data.decode(errors="replace")


@tool
async def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Write (create or replace) a text file in the sandbox; parent folders are created.

    Args:
        path: a path relative to the working directory, or absolute
        content: the whole new content of the file
    """
    try:
        await tracked_call(ctx.pending, ctx.sandbox.write_file, path, content)
    except ToolError:
        raise
    except Exception as exc:
        _reraise_crash(exc)
        raise ToolError(f"cannot write {path}: {exc}") from None
    return f"wrote {len(content.encode())} bytes to {path}"


@tool
async def list_files(ctx: ToolContext, path: str = ".", recursive: bool = False) -> str:
    """List the files in a folder of the sandbox (type, size, path).

    Args:
        path: the folder, relative to the working directory or absolute
        recursive: include sub-folders
    """
    try:
        entries = await tracked_call(ctx.pending, ctx.sandbox.list_files, path, recursive)
    except ToolError:
        raise
    except Exception as exc:
        _reraise_crash(exc)
        raise ToolError(f"cannot list {path}: {exc}") from None
    lines = [f"{e.type:7} {e.size:>9} {e.path}" for e in sorted(entries, key=lambda e: e.path)]
    if getattr(entries, "truncated", False):
        lines.append(f"(listing cut after {len(entries)} entries: list a sub-folder, or use bash, for the rest)")
    return "\n".join(lines) or "(empty)"


_ARITHMETIC = re.compile(r"[0-9+\-*/%(). ]{1,200}")


@tool
async def calculator(ctx: ToolContext, expression: str) -> str:
    """Evaluate an arithmetic expression exactly (integers and + - * / % ** and parentheses) and return the result.

    Args:
        expression: the expression, e.g. 347 * 29 + 5
    """
    if not _ARITHMETIC.fullmatch(expression.strip()):
        raise ToolError(f"not an arithmetic expression: {expression[:80]!r} (digits, + - * / % ( ) only)")
    # Evaluated in the sandbox, as every tool's work: python3 there, never in the host process.
    r = await tracked_call(ctx.pending, ctx.sandbox.exec, ["python3", "-c", f"print({expression.strip()})"],
                           timeout=command_timeout(10, ctx.timeout_s, ctx.deadline))
    if r.exit_code != 0:
        raise ToolError(r.stderr.decode(errors="replace").strip().splitlines()[-1][:200] if r.stderr else
                        f"exit code {r.exit_code}")
    return r.stdout.decode(errors="replace").strip()


@tool
def submit(ctx: ToolContext, answer: str = "") -> str:
    """Finish the task. For tasks with an answer, give it here; for tasks that change files, call it when done.

    Args:
        answer: the final answer, if the task asks for one
    """
    ctx.state["submitted"] = answer
    return "submitted"


def _reraise_crash(exc: Exception) -> None:
    if is_sandbox_crash(exc):
        raise exc


BUILTIN: dict[str, Tool] = {t.name: t for t in (bash, shell, python, read_file, write_file, list_files, calculator,
                                                 render, submit)}
