"""The episode endpoint's sandbox routes: `POST /exec {"command", "timeout"}` -> {"exit_code", "stdout",
"stderr", "limit"} (bash -c, in /app), `POST /files/read {"path"}` -> {"content"}, `POST /files/write {"path",
"content"}` -> {"ok": true}, `POST /shell {"keys", "wait"}` -> {"output", "started", "alive"} (the sandbox's
one interactive shell: its directory, variables and background jobs persist between calls), `POST /render {"page",
"width"}` -> {"exit_code", "text", "image"} (a web task's page in its image's headless Chromium: the description
a text-only model reads, and the screenshot as a PNG data URL, ready for a model that takes images). A command's timeout
ends by the episode's end (the sandbox kills it then), and a call whose program has gone is interrupted (the
sandbox kills its command) and waited for before the verifier (the episode's info says `exec_interrupted`).
Each action is kept for the episode's record; a sandbox that crashes under a call ends the episode's use of it
(503 from then on)."""

import base64
import json
import time
from typing import Any

from fastapi import FastAPI
from pydantic import Field

from temper.agent.episode import ToolRecord
from temper.agent.tools.builtin import RENDER_WIDTHS, command_timeout, render_page, tracked_call
from temper.envs.sandboxes import is_sandbox_crash
from temper.serve.layer import ApiError
from temper.serve.schemas import Lenient


class ExecRequest(Lenient):
    command: str = Field(min_length=1)
    timeout: float = Field(60.0, gt=0, le=600)


class ShellRequest(Lenient):
    keys: str = ""
    wait: float = Field(2.0, ge=0, le=600)


class RenderRequest(Lenient):
    page: str = Field("index.html", min_length=1)
    width: int = Field(1200, ge=RENDER_WIDTHS[0], le=RENDER_WIDTHS[1])
    timeout: float = Field(60.0, gt=0, le=600)


class FileRequest(Lenient):
    path: str = Field(min_length=1)
    content: str | None = None


def add_sandbox_routes(app: FastAPI, st: Any) -> None:
    """`st`: the episode's EpisodeState (its env's sandbox, its actions, its sandbox crash)."""

    @app.post("/exec")
    async def exec_(body: ExecRequest) -> Any:
        sb = _sandbox(st)
        t = time.monotonic()
        try:  # the sandbox kills the command by the episode's end, whether or not the program waits for it
            r = await tracked_call(st.pending, sb.exec, body.command,
                                   timeout=command_timeout(body.timeout, None, st.deadline))
        except Exception as exc:
            raise _failure(st, exc) from None
        out = {"exit_code": r.exit_code, "stdout": r.stdout.decode(errors="replace"),
               "stderr": r.stderr.decode(errors="replace"), "limit": r.limit}
        st.actions.append(ToolRecord("exec", {"command": body.command}, json.dumps(out)[:2000], r.exit_code != 0,
                                     time.monotonic() - t))
        return out

    @app.post("/shell")
    async def shell(body: ShellRequest) -> Any:
        sb = _sandbox(st)
        t = time.monotonic()
        try:
            out = await tracked_call(st.pending, sb.shell, body.keys,
                                     wait_s=command_timeout(body.wait, None, st.deadline))
        except Exception as exc:
            if is_sandbox_crash(exc):
                raise _failure(st, exc) from None
            raise ApiError(400, f"keys: the shell is unavailable: {exc}", "keys") from None
        st.actions.append(ToolRecord("shell", {"keys": body.keys}, out.text[-2000:], False, time.monotonic() - t))
        return {"output": out.text, "started": out.started, "alive": out.alive}

    @app.post("/render")
    async def render(body: RenderRequest) -> Any:
        sb = _sandbox(st)
        t = time.monotonic()
        try:
            shown = await render_page(sb, st.pending, body.page, body.width,
                                      command_timeout(body.timeout, None, st.deadline))
        except Exception as exc:
            raise _failure(st, exc) from None
        image = "data:image/png;base64," + base64.b64encode(shown.png).decode() if shown.png else None
        st.actions.append(ToolRecord("render", {"page": body.page, "width": body.width}, shown.text[:2000],
                                     shown.exit_code != 0, time.monotonic() - t))
        return {"exit_code": shown.exit_code, "text": shown.text, "image": image}

    @app.post("/files/read")
    async def read(body: FileRequest) -> Any:
        sb = _sandbox(st)
        try:
            data = await tracked_call(st.pending, sb.read_file, body.path)
        except Exception as exc:
            if is_sandbox_crash(exc):
                raise _failure(st, exc) from None
            raise ApiError(404, f"path: cannot read {body.path}: {exc}", "path") from None
        st.actions.append(ToolRecord("read_file", {"path": body.path}, "", False, 0.0))
        return {"content": data.decode(errors="replace")}

    @app.post("/files/write")
    async def write(body: FileRequest) -> Any:
        sb = _sandbox(st)
        try:
            await tracked_call(st.pending, sb.write_file, body.path, body.content or "")
        except Exception as exc:
            if is_sandbox_crash(exc):
                raise _failure(st, exc) from None
            raise ApiError(400, f"path: cannot write {body.path}: {exc}", "path") from None
        st.actions.append(ToolRecord("write_file", {"path": body.path}, "", False, 0.0))
        return {"ok": True}


def _sandbox(st: Any) -> Any:
    sb = getattr(st.env, "sandbox", None)
    if sb is None:
        raise ApiError(400, "this task has no sandbox: /exec and /files are for sandboxed (terminal) tasks")
    if st.sandbox_crash is not None:
        raise ApiError(503, f"the episode's sandbox crashed: {st.sandbox_crash}", kind="server_error")
    return sb


def _failure(st: Any, exc: BaseException) -> ApiError:
    if is_sandbox_crash(exc):
        st.sandbox_crash = exc
        return ApiError(503, f"the episode's sandbox crashed: {exc}", kind="server_error")
    return ApiError(400, f"exec failed: {type(exc).__name__}: {exc}")
