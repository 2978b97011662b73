"""`temper dashboard` in a real browser over real run folders: the run list and live charts, trajectories
and one episode with its tool call, a run being written, bad folders; and that it never writes."""

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import yaml

from temper.dashboard.folders import discover

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.e2e]


def _key(root: Path, run: Path) -> str:
    return next(f.key for f in discover([root]) if f.path == run)


def _rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]


def _snapshot(folder: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime) for p in folder.rglob("*")}


def test_run_list_and_run_page_chart_every_metrics_row(runs_root, dashboard, page, screenshot):
    tiny = runs_root / "tiny"
    before = _snapshot(runs_root)
    url = dashboard(runs_root)
    page.goto(url + "/")
    rows = page.locator("#runs tr[data-key]")
    assert rows.count() == 2 and "finished" in page.inner_text("#runs")
    page.goto(f"{url}/run?f={quote(_key(runs_root, tiny))}")
    metrics = _rows(tiny)
    page.wait_for_selector('[data-field="reward"][data-points]')
    assert page.get_attribute('[data-field="reward"]', "data-points") == str(len(metrics))
    numeric = {k for r in metrics for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert page.locator("#charts [data-field]").count() == len(numeric - {"step", "elapsed_s"})
    summary = json.loads((tiny / "summary.json").read_text())
    table = page.inner_text("#before-after")
    assert f"{summary['after']['mean_reward']:.3g}" in table and f"{summary['difference']['ci_low']:.3g}" in table
    assert "start" in page.inner_text("#audit") and page.get_attribute("#status", "class") == "badge finished"
    screenshot(page, "run")
    assert _snapshot(runs_root) == before, "the dashboard wrote into the folders it shows"


def test_episode_page_shows_its_tool_call_reward_and_group(runs_root, dashboard, page, screenshot):
    tools = runs_root / "tools"
    key = quote(_key(runs_root, tools))
    url = dashboard(runs_root)
    with sqlite3.connect(tools / "store.sqlite") as db:
        n = db.execute("SELECT COUNT(*) FROM trajectories WHERE status != 'in_flight'").fetchone()[0]
        ep_id, reward, group_id, data = db.execute(
            "SELECT id, reward, group_id, data FROM trajectories WHERE reward = 1 LIMIT 1").fetchone()
        group_size = db.execute("SELECT COUNT(*) FROM trajectories WHERE group_id = ?", (group_id,)).fetchone()[0]
    command = json.loads(data)["info"]["actions"][0]["arguments"]["command"]
    page.goto(f"{url}/episodes?f={key}&min_reward=1")
    assert page.locator("#episodes tr").count() - 1 == int(page.inner_text("#total").split()[0]) <= n
    screenshot(page, "trajectories")
    page.goto(f"{url}/episode?f={key}&id={quote(ep_id)}")
    calls = page.inner_text("#tool-calls")
    assert "exec" in calls and command in calls and "ok" in page.inner_text("#tool-calls .output")
    assert page.inner_text("#reward") == f"{reward:.3g}"
    assert page.locator("#group a").count() == group_size
    sampled = page.locator('#turns .tok[data-m="1"]')
    assert sampled.count() >= 1
    page.check('input[value="adv"]')
    assert page.get_attribute("#turns", "data-colour") == "adv"
    assert sampled.first.evaluate("t => t.style.background") != ""  # a scored group: its advantage is drawn
    screenshot(page, "episode")


def test_a_run_being_written_shows_new_steps_without_a_reload(runs_root, toy_model, tmp_path, dashboard, page):
    sys.path.insert(0, str(ROOT / "tests" / "orchestrator"))
    from orch_helpers import tiny_config

    live = tmp_path / "live"
    live.mkdir()
    cfg = tiny_config(toy_model, live / "run", max_steps=14, eval={"suite": None})
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    url = dashboard(live)
    train = subprocess.Popen([sys.executable, "-m", "temper", "train", "--config", str(tmp_path / "cfg.yaml")],
                             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (live / "run" / "metrics.jsonl").exists() or not _rows(live / "run"):
            assert train.poll() is None and time.monotonic() < deadline, train.stderr.read() if train.stderr else ""
            time.sleep(0.2)
        page.goto(f"{url}/run?f=0/run")
        page.wait_for_selector('[data-field="reward"][data-points]')
        first = int(page.get_attribute('[data-field="reward"]', "data-points"))
        assert first < 14 and page.inner_text("#status") == "running"
        page.evaluate("window.__same_document = true")  # gone if the page reloaded
        page.wait_for_function('document.querySelector(\'[data-field="reward"]\').dataset.points == "14"',
                               timeout=120_000)
        page.wait_for_function('document.getElementById("status").textContent == "finished"', timeout=60_000)
        assert page.evaluate("window.__same_document") is True and page.inner_text("#steps") == "14"
        assert train.wait(60) == 0
    finally:
        if train.poll() is None:
            train.send_signal(signal.SIGKILL)
            train.wait(10)


def test_bad_folders_say_so_in_one_line_and_nothing_crashes(runs_root, tmp_path, dashboard, page):
    bad = tmp_path / "bad"
    shutil.copytree(runs_root / "tiny", bad / "corrupt", ignore=shutil.ignore_patterns("store.sqlite*"))
    lines = (bad / "corrupt" / "metrics.jsonl").read_text().splitlines()
    lines.insert(2, '{"step": 3, "reward": 0.5')  # a torn line in the middle: line 3
    (bad / "corrupt" / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (bad / "notarun").mkdir()
    (bad / "notarun" / "config.yaml").write_text("model: x\n")
    url = dashboard(bad)
    page.goto(f"{url}/run?f=0/corrupt")
    page.wait_for_selector('[data-field="reward"][data-points]')
    problems = page.locator(".problem").all_inner_texts()
    assert any("metrics.jsonl line 3: not a JSON object" in p for p in problems), problems
    assert any("no trajectory store" in p for p in problems), problems
    assert page.get_attribute('[data-field="reward"]', "data-points") == str(len(lines) - 1)
    for path, status, words in (("/episodes?f=0/corrupt", 404, "no trajectory store"),
                                ("/run?f=0/notarun", 404, "not a run, eval or envqa folder"),
                                ("/run?f=0/../../etc", 404, "no such folder"),
                                ("/episodes?f=0/corrupt&min_reward=high", 400, "not a float"),
                                ("/episode?f=0/corrupt&id=nope", 404, "no trajectory store")):
        r = page.goto(url + path)
        assert r is not None and r.status == status, (path, r and r.status)
        assert page.locator(".problem").count() == 1 and words in page.inner_text(".problem"), path
    assert httpx.get(url + "/", timeout=10).status_code == 200  # still serving
