"""Fixtures for external agent programs: a terminal task folder and a writer for agent programs (Python files run
with this interpreter); `tiny_engine` is tests/conftest.py's."""

import sys
import textwrap

import pytest
from external_helpers import task_folder


@pytest.fixture
def terminal_suite(tmp_path):
    from temper.envs import parse_spec

    return parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks')}")


@pytest.fixture
def program(tmp_path):
    """program(source) -> argv running that Python source (dedented) with this interpreter."""
    def write(source: str, name: str = "agent.py") -> list[str]:
        path = tmp_path / name
        path.write_text(textwrap.dedent(source))
        return [sys.executable, str(path)]

    return write
