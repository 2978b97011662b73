"""The examples in docs/sandbox.md run as written; `#>` lines are output they must print."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

DOC = Path(__file__).resolve().parents[2] / "docs" / "sandbox.md"
BLOCKS = re.findall(r"```(bash|python)\n(.*?)```", DOC.read_text(), re.S)


def test_the_doc_has_examples() -> None:
    assert sum(lang == "bash" for lang, _ in BLOCKS) >= 5 and any(lang == "python" for lang, _ in BLOCKS)


# `temper` for the examples: the real sandbox commands and error handling, without importing the
# other commands (torch alone takes seconds to import, nine times over). test_sandbox_cli.py runs
# the real entry point.
SHIM = f"""#!{sys.executable}
import sys
import typer
from temper.cli.sandbox import register
from temper.errors import ConfigError, TemperError

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


@app.callback()
def root() -> None:
    pass


register(app)
try:
    app()
except ConfigError as exc:
    print("\\n".join("config error: " + p for p in exc.problems), file=sys.stderr)
    sys.exit(exc.exit_code)
except TemperError as exc:
    print(f"error: {{exc}}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""


@pytest.mark.timeout(300)
def test_doc_examples_run_as_written(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "temper").write_text(SHIM)
    (bin_dir / "temper").chmod(0o755)
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    for lang, code in BLOCKS:  # in order, in one folder: later examples may use earlier output
        argv = ["bash", "-e", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
        r = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=240)
        out = r.stdout + r.stderr
        assert r.returncode == 0, f"example failed ({r.returncode}):\n{code}\n---\n{out}"
        expected = [line[3:] for line in code.splitlines() if line.startswith("#> ")]
        pos = 0
        for want in expected:  # in order
            found = out.find(want, pos)
            assert found >= 0, f"expected {want!r} in the output of:\n{code}\n---\n{out}"
            pos = found + len(want)


def test_the_docs_yaml_settings_are_valid_sandbox_settings() -> None:
    """A sandbox configuration file shown in the doc is one `temper sandbox --config` takes, as written."""
    import yaml

    from temper.sandbox import SandboxConfig

    shown = [yaml.safe_load(b) for b in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.S)]
    assert shown
    for s in shown:
        assert SandboxConfig.model_validate(s).model_dump(exclude_unset=True) == s
