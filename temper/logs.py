"""Console logging: readable by default (rich), one JSON object per line with `--log-format json`."""

import json
import logging
import sys
import time
from collections import deque
from pathlib import Path
from typing import Literal

LogFormat = Literal["text", "json"]


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "fields", None)
        if isinstance(extra, dict):
            entry.update(extra)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup_logging(fmt: LogFormat = "text", level: str = "INFO") -> None:
    """Configure the root logger once per process; logs go to stderr so stdout stays for results."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if fmt == "json":
        handler: logging.Handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
    else:
        from rich.console import Console
        from rich.logging import RichHandler

        handler = RichHandler(console=Console(stderr=True), show_path=False, rich_tracebacks=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())
    # one INFO line per HTTP request (rollouts on a server make thousands) would drown everything else
    for noisy in ("httpx", "httpcore"):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))


def log_tail(path: str | Path, n: int = 5) -> list[str] | None:
    """The last `n` non-blank lines of a log file, stripped, read in one pass; a traceback's caret lines (`^^^`)
    are skipped (the line after them says why). None when the file cannot be read (missing: nothing logged yet)."""
    try:
        with open(path, errors="replace") as fh:
            return list(deque((ln.strip() for ln in fh if ln.strip() and not ln.lstrip().startswith("^")), maxlen=n))
    except OSError:
        return None
