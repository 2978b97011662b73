"""The `temper` command line as a user meets it: help, version, log formats, config errors."""

import json
import subprocess
import sys

from temper import __version__
from temper.cli.main import COMMAND_MODULES, app


def temper(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "temper", *args], capture_output=True, text=True, timeout=timeout)


def test_help_lists_every_registered_command_with_a_line_of_help():
    out = temper("--help")
    assert out.returncode == 0, out.stderr
    names = [c.name or c.callback.__name__ for c in app.registered_commands] + [
        g.name for g in app.registered_groups
    ]
    assert len(names) >= len(COMMAND_MODULES)
    for name in names:
        line = next((ln for ln in out.stdout.splitlines() if ln.strip("│ ").startswith(name + " ")), None)
        assert line is not None and len(line.strip("│ ")) > len(name) + 5, f"{name} has no help line"


def test_version():
    out = temper("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"temper {__version__}"


def test_config_errors_are_one_line_each_with_exit_code_2(tmp_path):
    cfg = tmp_path / "gen.yaml"
    cfg.write_text("sampling:\n  temperature: hot\nbogus: 1\n")
    out = temper("generate", "--config", str(cfg), "--prompt", "hi")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 2 and all(ln.startswith(f"config error: {cfg}") for ln in lines)
    assert "Traceback" not in out.stderr


def test_json_logs_are_one_object_per_line(smollm2_path):
    out = temper("--log-format", "json", "generate", "--model", "smollm2-135m", "--prompt", "Hi", "--max-tokens", "2")
    assert out.returncode == 0, out.stderr
    records = [json.loads(ln) for ln in out.stderr.strip().splitlines()]
    assert records and all({"time", "level", "logger", "message"} <= r.keys() for r in records)
