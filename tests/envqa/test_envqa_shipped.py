"""The shipped terminal suite's tasks pass every structural check (--no-policy, one oracle run each to
stay fast: reproducibility over N runs is proved on the planted tasks)."""

import asyncio
from pathlib import Path

import pytest

from temper.envqa import EnvQAConfig, run_envqa

pytestmark = pytest.mark.e2e


def test_shipped_terminal_tasks_pass_every_structural_check(tmp_path: Path) -> None:
    cfg = EnvQAConfig.from_recipe(dict(suite="terminal", policy=False, oracle_runs=1, concurrency=4,
        out=str(tmp_path / "qa")))
    report = asyncio.run(run_envqa(cfg))
    tasks = report["tasks"]
    assert len(tasks) >= 25
    assert {Path(t["path"]).name: t["verdicts"] for t in tasks if t["verdicts"] != ["ok"]} == {}
    assert report["clusters"] == []  # similar tasks (same topic, different files and answers) are not duplicates
    for t in tasks:  # every check ran
        assert t["oracle"]["passes"] == 1 and t["trivial"] is False and t["hackable"] is False
        assert 0.5 < t["time_margin"] <= 1 and t["contamination"] == []
    emails = next(t for t in tasks if Path(t["path"]).name == "text-extract-emails")
    assert emails["waived"] == ["sensitive-data"] and emails["sensitive"]  # made-up addresses: listed, waived
    assert len(__import__("json").loads((tmp_path / "qa" / "manifest.json").read_text())["tasks"]) == len(tasks)
