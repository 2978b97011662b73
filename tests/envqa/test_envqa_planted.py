"""A planted set of bad tasks is caught, each with the right verdict, and the good ones pass."""

import asyncio
import json
from pathlib import Path

import pytest
from envqa_plant import plant_bad, plant_good
from typer.testing import CliRunner

from temper.cli.main import app
from temper.envqa import EnvQAConfig, run_envqa

ORACLE_RUNS = 4  # the flaky task fails 1 run in 8 and its reward carries a random draw: caught either way


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("planted")
    good = plant_good(root)
    bad = plant_bad(root, good["good"])
    out = tmp_path_factory.mktemp("qa") / "run"
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={root}", policy=False, oracle_runs=ORACLE_RUNS,
        concurrency=4,
                      out=str(out)))
    report = asyncio.run(run_envqa(cfg))
    by_name = {Path(t["path"]).name: t for t in report["tasks"]}
    return {"root": root, "out": out, "report": report, "tasks": by_name, "paths": {**good, **bad}}


def verdicts(planted: dict, key: str) -> list[str]:
    return planted["tasks"][planted["paths"][key].name]["verdicts"]


@pytest.mark.parametrize(("key", "verdict"), [
    ("broken", "broken"), ("flaky", "flaky"), ("trivial", "trivial-verifier"), ("hackable", "hackable"),
    ("slow", "too-slow"), ("exact", "duplicate"), ("near", "duplicate"), ("humaneval", "contaminated"),
    ("sensitive", "sensitive-data"), ("malformed", "broken"),
])
def test_each_bad_task_gets_its_verdict(planted: dict, key: str, verdict: str) -> None:
    assert verdicts(planted, key) == [verdict]


def test_good_and_similar_but_distinct_tasks_pass(planted: dict) -> None:
    assert verdicts(planted, "good") == ["ok"]
    assert verdicts(planted, "distinct") == ["ok"]  # same topic, different files and answer: not a duplicate


def test_checks_ran_with_their_evidence(planted: dict) -> None:
    t, p = planted["tasks"], planted["paths"]
    task = lambda k: json.loads((planted["out"] / t[p[k].name]["file"]).read_text())  # noqa: E731
    good = task("good")["checks"]
    assert good["oracle"]["runs"] == ORACLE_RUNS and good["oracle"]["passes"] == ORACLE_RUNS
    assert good["controls"]["noop"]["value"] == 0.0 and good["controls"]["echo"]["value"] == 0.0
    assert good["controls"]["tamper"]["tamper_changes_outcome"] is False
    assert 0.5 < good["resources"]["time_margin"] < 1 and good["resources"]["peak_rss_mb"] > 1
    broken = task("broken")["checks"]["oracle"]
    assert broken["passes"] == 0 and "failing_log" in broken
    flaky = task("flaky")["checks"]["oracle"]
    assert flaky["agree"] is False and len({json.dumps(d["components"]) for d in flaky["details"]}) > 1
    assert task("trivial")["checks"]["controls"]["noop"]["value"] == 1.0
    hack = task("hackable")["checks"]["controls"]["tamper"]
    assert "/app/checks/check_log.py" in hack["tampered"] and hack["tamper_changes_outcome"]
    slow = task("slow")["checks"]["resources"]
    assert slow["limits_hit"] == ["wall_time"] and slow["time_margin"] <= 0
    dup = task("near")["checks"]["duplicates"]
    assert dup == {"duplicate_of": str(p["good"]), "kind": "near", "cluster_similarity": dup["cluster_similarity"]}
    assert task("exact")["checks"]["duplicates"]["kind"] == "exact"
    (overlap,) = task("humaneval")["checks"]["contamination"]["overlaps"][:1]
    assert overlap["source"] == "humaneval/HumanEval/0" and "has_close_elements" in overlap["span"]
    kinds = {(f["kind"], f["location"]) for f in task("sensitive")["checks"]["sensitive"]["findings"]}
    assert kinds == {("email", "environment/customers.csv:2"), ("phone", "environment/customers.csv:2"),
                     ("card-number", "environment/customers.csv:2"),
                     ("api-key (AWS access key)", "environment/deploy.env:1")}
    assert "missing tests/test.sh" in t[p["malformed"].name]["load_error"]


def test_report_files_and_manifest(planted: dict) -> None:
    out, report = planted["out"], planted["report"]
    assert json.loads((out / "report.json").read_text())["tasks"][0].keys() >= {"id", "path", "verdicts"}
    summary = report["summary"]
    assert summary["counts"]["ok"] == 2 and summary["tasks"] == 12
    assert 0 < summary["startup_share"] < 1 and summary["tasks_per_minute"] > 0
    for name in ("summary.md", "summary.html", "pass_rates.png", "clusters.json"):
        assert (out / name).stat().st_size > 0
    assert "| duplicate | 2 |" in (out / "summary.md").read_text()
    (cluster,) = json.loads((out / "clusters.json").read_text())
    assert cluster["keeper"] == str(planted["paths"]["good"]) and len(cluster["members"]) == 3
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(Path(t["path"]).name for t in manifest["tasks"]) == ["good-median", "good-mode"]


def test_cli_resumes_and_bad_input_is_one_line(planted: dict, tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["envqa", "--suite", f"terminal:path={planted['root']}", "--no-policy", "--oracle-runs", str(ORACLE_RUNS),
            "--out", str(planted["out"])]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "12 tasks: ok 2" in res.output
    again = json.loads((planted["out"] / "report.json").read_text())
    assert again["summary"]["executed"] == 0  # every task was already checked with these settings
    assert [t["verdicts"] for t in again["tasks"]] == [t["verdicts"] for t in planted["report"]["tasks"]]
    for bad in (["--suite", "nosuch"], ["--suite", "terminal", "--out", str(tmp_path / "no" / "such")],
                ["--suite", f"terminal:path={tmp_path}"]):
        res = runner.invoke(app, ["envqa", "--no-policy", "--out", str(tmp_path / "o"), *bad])
        assert res.exit_code != 0 and isinstance(res.exception, Exception)
        assert len(str(res.exception).splitlines()) == 1
