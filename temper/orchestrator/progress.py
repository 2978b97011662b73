"""Live progress on the console: a rich table redrawn after every step (a plain line per step
when the console is not a terminal, e.g. in CI logs)."""

import time
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

COLUMNS = [("step", "{:.0f}"), ("reward", "{:.3f}"), ("pass_rate", "{:.2f}"), ("rollout_tok_s", "{:.1f}"),
           ("train_tok_s", "{:.1f}"), ("staleness", "{:.2f}"), ("queue", "{:.0f}"),
           ("sandbox_episodes_per_s", "{:.2f}"), ("failures", "{:.0f}"), ("eta_s", "{:.0f}")]


class Progress:
    def __init__(self, total_steps: int, enabled: bool = True, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.total, self.start = total_steps, time.monotonic()
        self.live = Live(console=self.console, auto_refresh=False) if enabled and self.console.is_terminal else None
        self.rows: list[dict[str, float]] = []
        self.status = ""

    def __enter__(self) -> "Progress":
        if self.live is not None:
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def note(self, text: str) -> None:
        """A status line (evaluation progress, resume) shown under the table."""
        self.status = text
        if self.live is not None:
            self.live.update(self._table(), refresh=True)

    def step(self, row: dict[str, float]) -> None:
        self.rows.append(row)
        if self.live is not None:
            self.live.update(self._table(), refresh=True)
        else:
            self.console.print("train " + " ".join(f"{k}=" + fmt.format(row.get(k, float("nan")))
                                                   for k, fmt in COLUMNS), highlight=False)

    def _table(self) -> Table:
        t = Table(title=f"temper train  ({time.monotonic() - self.start:.0f}s)", caption=self.status)
        for k, _ in COLUMNS:
            t.add_column(k, justify="right")
        for row in self.rows[-12:]:
            t.add_row(*(fmt.format(row.get(k, float("nan"))) for k, fmt in COLUMNS))
        return t
