"""`temper sft`: supervised fine-tuning on a JSONL of chat transcripts (warm starts, tests)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config, resolve_config


def register(app: typer.Typer) -> None:
    @app.command()
    def sft(
        config: ConfigOption = None,
        sets: SetOption = None,
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Run folder for checkpoints (resumes from it).",
                                                 show_default=False)] = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Fine-tune a model on chat transcripts; prints one JSON summary line at the end."""
        from temper.rl.config import SFTConfig
        from temper.rl.sft import run_sft

        cfg = resolve_config(SFTConfig, config, sets, {"out": None if out is None else str(out)})
        if show:
            print_config(cfg)
        summary = run_sft(cfg)
        typer.echo(json.dumps(summary))
