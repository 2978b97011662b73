"""`temper doctor`: the state of each first-time artefact on this machine, and what crashed runs left.

Every first-time step is safe to interrupt (temper/firsttime.py) and the next run cleans up after a
killed one; this command shows the same from outside: what is built, what is being built and by whom,
what was left half done, and removes the leftovers (`--dry-run`: only reports).
"""

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

import temper
from temper import firsttime
from temper.firsttime import temper_home
from temper.sandbox import SandboxConfig, layout, leftovers, uids


@dataclass
class Row:
    artefact: str
    state: str  # ok, missing, building, incomplete
    path: Path | None
    detail: str = ""
    fixes: list[tuple[str, Callable[[], None]]] = field(default_factory=list)  # (what, how) to clean


def _lock_note(lock: Path) -> str:
    """Who builds it now, or the record of a holder that died (the next holder takes it over)."""
    owner = firsttime.read_owner(lock)
    if firsttime.is_held(lock):
        return f"being built now by {owner or 'another process'}"
    return f"lock left by {owner}, which is gone (taken over on next use)" if owner else ""


def _built_folders(parent: Path, names: list[Path], artefact: str) -> list[Row]:
    """firsttime.build_once folders: complete (marker), or not (an interrupted or older build)."""
    rows = []
    for folder in names:
        lock = folder.with_name(folder.name + ".lock")
        if (folder / firsttime.MARKER).exists():
            rows.append(Row(artefact, "ok", folder, _lock_note(lock)))
        elif firsttime.is_held(lock):
            rows.append(Row(artefact, "building", folder, _lock_note(lock)))
        else:
            why = "no completion marker (an interrupted or older build): rebuilt on next use"
            rows.append(Row(artefact, "incomplete", folder, why,
                            [(f"removed {folder}", lambda f=folder: firsttime.remove(f))]))
    left = firsttime.interrupted_builds(parent)
    for path in left:
        rows.append(Row(artefact, "leftover", path, "an interrupted build's temporary folder",
                        [(f"removed {path}", lambda p=path: firsttime.remove(p))]))
    for path in sorted(set(parent.glob(".tmp-*")) - set(left)) if not rows else []:  # a first build, running
        lock = parent / (path.name.split("-", 1)[1].rsplit("-", 1)[0] + ".lock")
        rows.append(Row(artefact, "building", path, _lock_note(lock)))
    return rows


def kernels() -> list[Row]:
    from torch.utils.cpp_extension import _get_build_directory

    root = Path(_get_build_directory("", verbose=False))  # temper/native's build root ("" names it)
    rows = _built_folders(root, sorted(p for p in root.glob("temper_kernels_*") if p.is_dir()), "C++ kernels")
    return rows or [Row("C++ kernels", "missing", root, "built by the first engine (or scripts/setup.sh)")]


def models() -> list[Row]:
    root = temper_home() / "models"
    found = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    rows = _built_folders(root, found, "converted model")
    return rows or [Row("converted model", "missing", root, "converted on first use of a bundled or GGUF model")]


def _in_place(artefact: str, folder: Path, done: Path, how: str) -> Row:
    """A folder built in place with .temper-building present until its last step (the set-up scripts)."""
    lock = folder.with_name(folder.name + ".lock")
    if (folder / layout.BUILDING).exists():
        if firsttime.is_held(lock):
            return Row(artefact, "building", folder, _lock_note(lock))
        return Row(artefact, "incomplete", folder, f"an interrupted build, never used; {how} builds it anew",
                   [(f"removed {folder}", lambda: firsttime.remove(folder))])
    if done.exists():
        return Row(artefact, "ok", folder)
    return Row(artefact, "missing", folder, f"{how} builds it")


def sandbox_python() -> list[Row]:
    env = os.environ.get("TEMPER_SANDBOX_PYTHON")
    cands = [Path(env)] if env else [layout.SYSTEM_PYTHON_ENV, Path(temper.__file__).parents[1] / ".cache" /
                                     "sandbox-python"]
    rows = [_in_place("sandbox Python", c, c / "bin" / "pytest", "scripts/setup.sh") for c in cands]
    return [r for r in rows if r.state != "missing"] or rows[:1]


def vllm() -> list[Row]:
    venv = Path(temper.__file__).parents[1] / os.environ.get("VLLM_VENV", ".venv-vllm")  # as setup_vllm.sh
    return [_in_place("vLLM venv", venv, venv / ".temper-setup", "scripts/setup.sh --with-vllm")]


def sandbox_state(cfg: SandboxConfig) -> list[Row]:
    state = cfg.state_dir
    templates = [p for p in (state / "templates").glob("*") if not p.name.startswith(".")]
    locks = [uids.lock_dir(cfg) / f"{u}.lock" for u in uids.uid_range(cfg)]
    holders = {f"pid {o.pid}" if o else "?" for o in map(firsttime.read_owner, filter(firsttime.is_held, locks))}
    detail = f"{len(templates)} staged templates; uids leased by {', '.join(sorted(holders)) or 'no live sandbox'}"
    rows = [Row("sandbox state", "ok" if state.is_dir() else "missing", state, detail)]
    for left in leftovers.find(state) if state.is_dir() else []:
        rows.append(Row("sandbox state", "leftover", left.path, f"{left.what}: {left.reason}",
                        [(f"removed {left.what} {left.path}", lambda lo=left: leftovers.remove(lo))]))
    return rows


def register(app: typer.Typer) -> None:
    @app.command("doctor")
    def doctor(
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report; remove nothing.")] = False,
        state_dir: Annotated[Path | None, typer.Option(
            "--state-dir", help="The sandboxes' state folder (default: SandboxConfig's).")] = None,
    ) -> None:
        """Report each first-time artefact's state (kernels, models, sandbox Python and state, vLLM) and
        remove what crashed runs left behind."""
        cfg = SandboxConfig() if state_dir is None else SandboxConfig(state_dir=state_dir)
        rows = [*kernels(), *models(), *sandbox_python(), *vllm(), *sandbox_state(cfg)]
        width = max(len(r.artefact) for r in rows)
        for r in rows:
            typer.echo(f"{r.artefact:<{width}}  {r.state:<10}  {r.path}" + (f"  ({r.detail})" if r.detail else ""))
        fixes = [fix for r in rows for fix in r.fixes]
        for what, how in fixes:
            if not dry_run:
                how()
            typer.echo(f"{'would be ' if dry_run else ''}{what}")
        typer.echo(f"{len(fixes)} leftover{'s' if len(fixes) != 1 else ''} "
                   + ("found (--dry-run: nothing removed)" if dry_run else "removed" if fixes else "found"))
