"""`temper eval`: run suites (and the long-context grid) through a model or the suites' oracles."""

import asyncio
import shlex
from pathlib import Path
from typing import Annotated

import typer

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config, resolve_config


def register(app: typer.Typer) -> None:
    @app.command("eval")
    def eval_cmd(
        config: ConfigOption = None,
        sets: SetOption = None,
        model: Annotated[str | None, typer.Option("--model", "-m", help="Bundled name, folder, GGUF file or Hub id.",
                                                  show_default=False)] = None,
        endpoint: Annotated[str | None, typer.Option("--endpoint", help="Evaluate an OpenAI-compatible server "
                                                     "(URL); --model names its tokenizer.", show_default=False)] = None,
        suite: Annotated[list[str] | None, typer.Option("--suite", help="Suite spec (repeatable), e.g. "
                                                        "humaneval or noisy:suite=(humaneval),rate=0.05.",
                                                        show_default=False)] = None,
        samples: Annotated[int | None, typer.Option("--samples", "-k", help="Samples per task.",
                                                    show_default=False)] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Run folder (resumes from it).",
                                                 show_default=False)] = None,
        oracle: Annotated[bool | None, typer.Option("--oracle/--no-oracle", help="Run the reference solutions.",
                                                    show_default=False)] = None,
        grid: Annotated[bool, typer.Option("--grid", help="Also run the long-context grid and latency/cost curves.")]
        = False,
        limit: Annotated[int | None, typer.Option("--limit", help="Only the first N tasks of each suite.",
                                                  show_default=False)] = None,
        concurrency: Annotated[int | None, typer.Option("--concurrency", help="Items in flight at once.",
                                                        show_default=False)] = None,
        temperature: Annotated[float | None, typer.Option("--temperature", help="agent.temperature: 0 = greedy "
                                                          "(default with one sample; 0.8 with several).",
                                                          show_default=False)] = None,
        agent_command: Annotated[str | None, typer.Option("--agent-command", help="Run this program as the agent "
                                                          "of each item (agent.kind external; docs/agents.md).",
                                                          show_default=False)] = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Evaluate a model on suites: per-item JSONL, summary.json, report.md/.html under --out."""
        from temper.errors import TemperError
        from temper.evals.config import EvalConfig
        from temper.evals.harness import run_eval, summary_lines
        from temper.runtime import apply_runtime

        argv = None
        if agent_command is not None:
            try:
                argv = shlex.split(agent_command)
            except ValueError as exc:
                raise TemperError(f"--agent-command {agent_command!r}: {exc}") from None
            if not argv:
                raise TemperError("--agent-command: empty (give the program to run, e.g. 'python my_agent.py')")
        cfg = resolve_config(EvalConfig, config, sets, {
            "model": model, "endpoint": endpoint, "suites": list(suite) if suite else None,
            "out": None if out is None else str(out), "samples": samples, "oracle": oracle, "limit": limit,
            "concurrency": concurrency, "agent.temperature": temperature,
            "agent.kind": "external" if argv else None, "agent.command": argv})
        if show:
            print_config(cfg)
        apply_runtime(cfg.runtime)
        run = asyncio.run(run_eval(cfg, grid=grid))
        for line in summary_lines(run):
            typer.echo(line)
