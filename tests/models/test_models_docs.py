"""Every example in docs/models.md runs as written (Python blocks, commands, and the console
transcripts, whose printed lines must match)."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from temper.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "models.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOC, flags=re.S)


def _temper(command: str) -> tuple[dict[str, str], list[str]]:
    """`VAR=1 .venv/bin/temper args` -> (env additions, argv running this checkout's temper)."""
    words = shlex.split(command)
    env = {}
    while "=" in words[0] and not words[0].startswith("-"):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    assert words[0].endswith("temper"), command
    return env, [sys.executable, "-m", "temper", *words[1:]]


def test_python_examples_run(tmp_path, monkeypatch, capsys):
    blocks = [code for lang, code in BLOCKS if lang == "python"]
    assert len(blocks) >= 4
    monkeypatch.chdir(tmp_path)  # the examples write under out/
    for code in blocks:  # in this process (imports and the model cache are warm), each in a fresh namespace
        exec(compile(code, "docs/models.md", "exec"), {})
    out = capsys.readouterr().out
    assert "LlamaForCausalLM 30" in out and "<|im_start|>assistant" in out


def test_commands_run():
    """The `temper generate` examples, run in this process through the CLI app (the README test
    covers the real `temper` executable)."""
    commands = [line for lang, code in BLOCKS if lang == "bash" for line in code.splitlines() if line.strip()]
    assert len(commands) >= 3
    outputs = []
    for command in commands:
        _, argv = _temper(command)
        result = CliRunner().invoke(app, argv[3:])
        assert result.exit_code == 0, (command, result.output, result.exception)
        assert result.stdout.strip(), command
        outputs.append(result.stdout)
    assert "Paris" in outputs[0]  # the capital-of-France example


def test_console_transcripts_match():
    transcripts = [code for lang, code in BLOCKS if lang == "console"]
    checked = 0
    for transcript in transcripts:
        lines = transcript.strip().splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            expected = lines[i + 1]
            env, argv = _temper(line[2:])
            proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=120,
                                  env={**os.environ, "COLUMNS": "400", **env})
            assert proc.returncode != 0 and proc.stderr.strip() == expected, (line, proc.stderr)
            checked += 1
    assert checked >= 2
