"""`temper train`: reinforcement learning of a model on task suites (see docs/train.md)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config


def register(app: typer.Typer) -> None:
    @app.command()
    def train(
        config: ConfigOption = None,
        sets: SetOption = None,
        max_steps: Annotated[int | None, typer.Option("--max-steps", help="Trainer steps to run.",
                                                      show_default=False)] = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Run folder (default runs/train-<time>).",
                                                 show_default=False)] = None,
        resume: Annotated[Path | None, typer.Option("--resume", help="Continue the run in this folder.",
                                                    show_default=False)] = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Train with RL (default recipe: SmolLM2-135M-Instruct, GRPO on two-digit sums), evaluating
        held-out tasks before and after; prints the summary as one JSON line."""
        from temper.errors import TemperError
        from temper.orchestrator.train import resolve_train_config
        from temper.orchestrator.train import train as run_train

        if resume is not None and out is not None and Path(out) != Path(resume):
            raise TemperError("--out and --resume name different folders; --resume continues in its own folder")
        flags = {"max_steps": max_steps, "out": None if out is None else str(out)}
        if show:  # nothing is created: no run folder, no model loaded
            print_config(resolve_train_config(config, sets, flags, str(resume) if resume else None, create=False)[0])
        cfg, run = resolve_train_config(config, sets, flags, str(resume) if resume is not None else None)
        summary = run_train(cfg, run)
        typer.echo(json.dumps({k: summary.get(k) for k in ("run", "steps", "wall_s", "before", "after",
                                                            "difference")}))
