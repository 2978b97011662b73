"""`temper sandbox run | check | audit-verify`: run one command isolated, report isolation, verify logs."""

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from temper.cli.common import ConfigOption, SetOption, resolve_config
from temper.sandbox import Sandbox, SandboxConfig, verify
from temper.sandbox.check import check as run_check


def register(app: typer.Typer) -> None:
    sandbox = typer.Typer(help="Isolated execution of commands (bwrap or Landlock), with an audit log.",
                          no_args_is_help=True)

    @sandbox.command("run", context_settings={"ignore_unknown_options": True})
    def run(
        cmd: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
        timeout: Annotated[float | None, typer.Option("--timeout", help="Wall-time limit, seconds.")] = None,
        memory_mb: Annotated[int | None, typer.Option("--memory-mb", help="Memory limit, MiB.")] = None,
        workspace: Annotated[Path | None, typer.Option(
            "--workspace", help="Template folder, seen at workspace_mount (/app); never changed itself.")] = None,
        isolation: Annotated[str | None, typer.Option("--isolation", help="auto, bwrap, landlock or none.")] = None,
        config: ConfigOption = None,
        sets: SetOption = None,
    ) -> None:
        """Run CMD in a fresh sandbox; pass its output through and exit with its exit code."""
        cfg = resolve_config(SandboxConfig, config, sets, {
            "limits.wall_time_s": timeout, "limits.memory_mb": memory_mb,
            "workspace": None if workspace is None else str(workspace), "isolation": isolation})
        with Sandbox(cfg) as sb:
            r = sb.exec(cmd)
        sys.stdout.buffer.write(r.stdout)
        sys.stdout.flush()
        sys.stderr.buffer.write(r.stderr)
        code = r.exit_code if r.exit_code >= 0 else 128 - r.exit_code
        if r.limit is not None:
            sys.stderr.write(f"temper: sandbox limit hit: {r.limit} ({_limit_text(cfg, r.limit)})\n")
            code = code or 1
        sys.stderr.flush()
        raise typer.Exit(code)

    @sandbox.command("check")
    def check_cmd(config: ConfigOption = None, sets: SetOption = None) -> None:
        """Print the isolation in force on this host, feature by feature."""
        cfg = resolve_config(SandboxConfig, config, sets)
        table = Table("feature", "in force", "detail", show_lines=False, box=None)
        features = run_check(cfg)
        for f in features:
            table.add_row(f.name, "yes" if f.ok else "no", f.detail)
        Console(width=200).print(table)
        if not any(f.name == "sandbox starts" and f.ok for f in features):
            raise typer.Exit(1)

    @sandbox.command("audit-verify")
    def audit_verify(log: Annotated[Path, typer.Argument(help="An audit log (sandbox-audit.jsonl).")]) -> None:
        """Check an audit log's hash chain: exit 0 when intact, 1 at the first broken record."""
        if not log.is_file():
            from temper.sandbox.errors import SandboxError

            raise SandboxError(f"{log}: audit log not found")
        ok, line = verify(log)
        typer.echo(line)
        raise typer.Exit(0 if ok else 1)

    app.add_typer(sandbox, name="sandbox")


def _limit_text(cfg: SandboxConfig, limit: str) -> str:
    lim = cfg.limits
    return {
        "wall_time": f"{lim.wall_time_s} s wall time",
        "cpu": f"{lim.cpu_time_s} s CPU",
        "memory": f"{lim.memory_mb} MiB",
        "processes": f"{lim.processes} processes",
        "file_size": f"{lim.file_size_mb} MiB per file",
        "output": f"{lim.output_bytes} bytes per stream",
        "disk": f"{lim.disk_mb} MiB of writable space",
    }.get(limit, limit)
