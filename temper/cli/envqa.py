"""`temper envqa`: validate and stratify every task of a suite (report + filtered manifest under --out)."""

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config, resolve_config


def register(app: typer.Typer) -> None:
    @app.command("envqa")
    def envqa_cmd(
        config: ConfigOption = None,
        sets: SetOption = None,
        suite: Annotated[str | None, typer.Option("--suite", help="Suite spec to check, e.g. terminal or "
                                                  "terminal:path=DIR.", show_default=False)] = None,
        model: Annotated[str | None, typer.Option("--model", "-m", help="Policy for the pass rate (default "
                                                  "smollm2-135m).", show_default=False)] = None,
        samples: Annotated[int | None, typer.Option("--samples", "-k", help="Policy samples per task (default 8).",
                                                    show_default=False)] = None,
        oracle_runs: Annotated[int | None, typer.Option("--oracle-runs", help="Oracle runs per task (default 3).",
                                                        show_default=False)] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Report folder (a rerun resumes it).",
                                                 show_default=False)] = None,
        policy: Annotated[bool | None, typer.Option("--policy/--no-policy", help="Sample the policy for pass "
                                                    "rates (--no-policy: structural checks only).",
                                                    show_default=False)] = None,
        against: Annotated[list[str] | None, typer.Option("--against", help="Evaluation suite to check for "
                                                          "contamination (repeatable; default humaneval).",
                                                          show_default=False)] = None,
        concurrency: Annotated[int | None, typer.Option("--concurrency", help="Tasks checked at once.",
                                                        show_default=False)] = None,
        limit: Annotated[int | None, typer.Option("--limit", help="Only the first N tasks.", show_default=False)]
        = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Check a suite's tasks: oracle reproducibility, negative controls, resource fit, policy pass rate,
        duplicates, sensitive data, contamination. Writes DIR/report.json, summary.md/.html, pass_rates.png,
        clusters.json and manifest.json (a suite: manifest:path=DIR/manifest.json)."""
        from temper.envqa import EnvQAConfig, run_envqa
        from temper.runtime import RuntimeConfig, apply_runtime

        cfg = resolve_config(EnvQAConfig, config, sets, {
            "suite": suite, "model": model, "against": list(against) if against else None,
            "out": None if out is None else str(out), "samples": samples, "oracle_runs": oracle_runs,
            "policy": policy, "concurrency": concurrency, "limit": limit})
        if show:
            print_config(cfg)
        apply_runtime(RuntimeConfig(seed=cfg.seed))  # one torch thread, as every command (the engine sets none)
        report = asyncio.run(run_envqa(cfg))
        s = report["summary"]
        counts = ", ".join(f"{v} {n}" for v, n in s["counts"].items() if n)
        typer.echo(f"{s['tasks']} tasks: {counts}")
        typer.echo(f"report: {Path(cfg.out) / 'report.json'}; manifest: {Path(cfg.out) / 'manifest.json'} "
                   f"(suite spec manifest:path={Path(cfg.out) / 'manifest.json'})")
