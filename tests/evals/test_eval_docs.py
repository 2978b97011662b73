"""Every example in docs/evals.md runs as written: the `temper eval` / `temper compare` commands
(through the CLI app, in document order, in one scratch folder) and the Python block."""

import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from temper.cli.main import app

pytestmark = [pytest.mark.slow, pytest.mark.e2e]

DOC = (Path(__file__).resolve().parents[2] / "docs" / "evals.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOC, flags=re.S)


COMMANDS = [line for lang, code in BLOCKS if lang == "bash" for line in code.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("docs")


def test_the_doc_has_its_examples() -> None:
    assert len(COMMANDS) >= 5 and all(c.startswith("temper ") for c in COMMANDS)
    assert COMMANDS[-1].startswith("temper compare")  # it compares a run made by an earlier example


@pytest.mark.parametrize("command", COMMANDS)
def test_command_runs_as_written(command: str, workdir: Path, monkeypatch) -> None:
    """In document order, in one scratch folder (one test each, so each has the whole timeout)."""
    monkeypatch.chdir(workdir)
    argv = shlex.split(command)[1:]
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, (command, result.output, result.exception)
    if argv[0] == "compare":
        assert result.stdout.strip().splitlines()[-1] == "verdict: no significant change"
        return
    out = Path(argv[argv.index("--out") + 1])
    summary = json.loads((out / "summary.json").read_text())
    assert (out / "report.html").is_file()
    for entry in summary["suites"].values():
        assert entry["infra_failures"] == 0 and entry["n"] > 0, (command, entry)
    if out.name == "oracle-terminal":
        assert summary["suites"]["terminal"]["mean_reward"] == 1.0
    elif out.name == "oracle-humaneval":
        assert summary["robustness"][0]["clean"] == "humaneval" and summary["suites"]["humaneval"]["pass@1"] == 1.0
    elif out.name == "smollm2":
        smol = summary["suites"]
        assert smol["humaneval"]["pass@2"] is not None and smol["longctx:task=niah,length=300,n=1"]["n"] == 1
    elif out.name == "smollm2-grid":
        assert summary["longctx_grid"]["lengths"] == [128, 256] and len(summary["curves"]["points"]) == 2


def test_python_example_runs(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = [code for lang, code in BLOCKS if lang == "python"]
    assert len(blocks) == 1
    exec(compile(blocks[0], "docs/evals.md", "exec"), {})
    assert capsys.readouterr().out.splitlines()[-2:] == ["1.0", "improved everywhere 1.0"]
