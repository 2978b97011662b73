"""`temper compare RUN_A RUN_B`: per suite and domain, B - A with confidence intervals, and a verdict."""

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("compare")
    def compare_cmd(
        run_a: Annotated[Path, typer.Argument(help="The earlier run folder (A, e.g. before training).")],
        run_b: Annotated[Path, typer.Argument(help="The later run folder (B).")],
        out: Annotated[Path | None, typer.Option("--out", "-o", help="Folder for compare.md/.html/.json "
                                                 "(default: RUN_B/compare).", show_default=False)] = None,
    ) -> None:
        """Compare two eval runs, paired per task where the tasks match; the last line is the verdict."""
        from temper.evals.compare import compare_lines, compare_runs, write_comparison

        cmp = compare_runs(run_a, run_b)
        write_comparison(cmp, out or run_b / "compare")
        for line in compare_lines(cmp):
            typer.echo(line)
