"""Two steps of `temper train` on the web suite with the real SmolLM2 (its pages are rendered and scored in the
tasks' browser image; learning is not asked of a 135M model), then the dashboard's episode page showing an
episode's final screenshot beside its tool calls."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from temper.dashboard.folders import discover

pytestmark = [pytest.mark.slow, pytest.mark.e2e, pytest.mark.timeout(1500)]
ROOT = Path(__file__).resolve().parents[2]


def test_two_training_steps_on_the_web_suite_keep_each_episodes_screenshot_for_the_dashboard(
        smollm2_path, tmp_path, dashboard, page, screenshot):
    recipe = {
        "model": str(smollm2_path), "suites": [{"spec": "web"}],
        "algorithm": {"checkpoint": {"keep_last": 2, "keep_best": False}},
        "agent": {"max_turns": 2, "max_turn_tokens": 96, "max_context_tokens": 3072},  # a web prompt: ~1.6k
        "orchestrator": {"group_size": 2, "batch_groups": 2, "max_staleness": 0, "concurrency": 4},
        "eval": {"suite": None}, "max_steps": 2, "out": str(tmp_path / "run"),
        "logging": {"progress": False, "plots": False}}
    (tmp_path / "web.yaml").write_text(yaml.safe_dump(recipe))
    r = subprocess.run([sys.executable, "-m", "temper", "train", "--config", str(tmp_path / "web.yaml")],
                       cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert r.returncode == 0, r.stderr[-3000:]

    run = tmp_path / "run"
    with sqlite3.connect(run / "store.sqlite") as db:
        rows = [(i, json.loads(d)) for i, d in db.execute(
            "SELECT id, data FROM trajectories WHERE status != 'in_flight' AND data IS NOT NULL")]
    scored = [(i, t) for i, t in rows if t["failure"] is None]
    assert len(scored) >= 8, [t["failure"] for _, t in rows]  # two steps of two groups of two
    pass_rate = sum(t["reward"] == 1.0 for _, t in scored) / len(scored)
    mean = sum(t["reward"] for _, t in scored) / len(scored)
    print(f"SmolLM2 on the web suite, two steps: pass rate {pass_rate:.2f}, mean reward {mean:.3f} over "
          f"{len(scored)} trajectories")
    shots = [(i, t) for i, t in scored if t["info"].get("screenshot_png")]
    assert shots, "no episode kept its verifier's screenshot"
    assert all(t["info"]["category"] for _, t in scored)  # each episode knows its task's category

    episode_id = shots[0][0]
    key = next(f.key for f in discover([tmp_path]) if f.path == run)
    page.goto(f"{dashboard(tmp_path)}/episode?f={quote(key)}&id={quote(episode_id)}")
    img = page.locator("#screenshot img")
    assert img.evaluate("i => i.complete && i.naturalWidth") >= 400  # the PNG decodes in the browser
    assert page.locator("#tool-calls").count() == 1  # beside the tool calls
    assert "screenshot_png" not in page.inner_text("main pre:last-of-type")  # not dumped as text
    screenshot(page, "web-episode")
