"""The web suite: pages verified by rendering them in a real headless Chromium inside the task's image (Debian's
chromium and playwright, the base that `FROM mcr.microsoft.com/playwright/python:*` maps to). The oracle scores 1
on every component, doing nothing 0, and a page with the right content but no layout gets exactly the
components that hold for how it renders."""

import asyncio
import base64
import json
import shutil
from pathlib import Path

import pytest

from temper.envs import parse_spec
from temper.images.config import PLAYWRIGHT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
CATEGORIES = {"layout", "forms", "game", "dataviz", "accessibility", "assets"}

UNSTYLED = """<!doctype html><html><body><h1>Our team</h1>
<div class="card"><h2>Ada Lovelace</h2><p>Engineer</p></div>
<div class="card"><h2>Grace Hopper</h2><p>Admiral</p></div>
<div class="card"><h2>Alan Turing</h2><p>Scientist</p></div></body></html>"""


TASKS = Path(__file__).resolve().parents[2] / "temper" / "envs" / "tasks" / "web"
NAMES = sorted(p.parent.name for p in TASKS.glob("*/task.toml"))
PARTIAL = {p.stem: json.loads(p.read_text()) for p in (Path(__file__).parent / "web_partial").glob("*.json")}


@pytest.fixture(scope="module")
def suite():
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    s = parse_spec("web")
    s.tasks()  # builds the images (once; kept by content)
    return s


def task_named(suite, name):
    return next(t for t in suite.tasks() if t.payload["name"] == name)


def test_the_web_suite_ships_twenty_tasks_across_its_categories_each_with_a_wrong_page():
    from temper.envs.taskfolder import load_task_folder

    categories = {n: load_task_folder(TASKS / n).category for n in NAMES}
    assert len(NAMES) >= 20 and set(categories.values()) == CATEGORIES, categories
    assert set(PARTIAL) <= set(NAMES) and {categories[n] for n in PARTIAL} == CATEGORIES  # a wrong page per category


@pytest.mark.parametrize("name", sorted(PARTIAL))
def test_a_wrong_page_scores_below_1_on_the_component_it_breaks(suite, name):
    """Each case (tests/envs/web_partial/NAME.json): the oracle's page spoilt (or a page of its own), and the
    exact components its rendering earns."""
    case = PARTIAL[name]

    async def partial():
        async with suite.make_env(task_named(suite, name)) as env:
            await env.reset()
            if case["after_solution"]:
                await env.run_solution()
            made = await env.exec(case["make"], user="root")
            assert made.exit_code == 0, made
            return await env.verify()

    reward = asyncio.run(partial())
    assert reward.components == case["expected"], reward.info.get("test_output")
    assert reward.value == pytest.approx(sum(case["expected"].values()) / len(case["expected"]))
    assert reward.value < 1
    assert base64.b64decode(reward.info["screenshot_png"]).startswith(b"\x89PNG")  # kept with the episode


def test_the_browser_base_pins_the_playwright_the_tests_use():
    import tomllib
    from pathlib import Path

    deps = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = [d for group in deps["project"]["optional-dependencies"].values() for d in group if "playwright" in d]
    assert pins == [PLAYWRIGHT], pins


def test_envqa_says_ok_for_every_web_task(suite, tmp_path):
    """Each task's oracle scores 1 three times alike (rendering is deterministic), no-op and echo score 0, the
    tamper run cannot fake a render, and the resource fit is measured in the browser image (its memory peak from
    the sandbox, no Python wrapper)."""
    from temper.envqa import EnvQAConfig, run_envqa

    cfg = EnvQAConfig.from_recipe(dict(suite="web", policy=False, oracle_runs=3, concurrency=2, out=str(tmp_path)))
    report = asyncio.run(run_envqa(cfg))
    names = sorted(t.payload["name"] for t in suite.tasks())
    assert {t["path"].rsplit("/", 1)[-1]: t["verdicts"] for t in report["tasks"]} == {n: ["ok"] for n in names}
    for t in report["tasks"]:
        assert t["oracle"]["passes"] == 3 and t["oracle"]["agree"] and t["trivial"] is False
        assert t["hackable"] is False and 0 < t["memory_margin"] < 1


def test_the_agents_render_tool_describes_the_page_as_chromium_lays_it_out(suite):
    from temper.agent.tools import BUILTIN, ToolContext

    task = next(t for t in suite.tasks() if t.payload["name"] == "web-team-cards")

    async def look():
        async with suite.make_env(task) as env:
            await env.reset()
            assert "render" in env.tools
            ctx = ToolContext(env=env)
            await BUILTIN["write_file"](ctx, {"path": "index.html", "content": UNSTYLED.replace(
                "<body>", "<head><title>Our team</title></head><body><script>oops()</script>")})
            seen = await BUILTIN["render"](ctx, {"page": "index.html", "width": 900})
            shot = await env.exec("head -c 4 /tmp/render-900.png | od -An -c")
            return seen, shot.text

    seen, shot = asyncio.run(look())
    assert seen.startswith("exit code 0\nindex.html at 900 px wide: HTTP 200, title 'Our team'"), seen
    assert "oops is not defined" in seen  # the console error the page raised
    cards = [line for line in seen.splitlines() if line.strip().startswith("div.card at")]
    ys = [int(line.split("at (")[1].split(",")[1].split(")")[0]) for line in cards]
    assert len(cards) == 3 and ys == sorted(ys) and len(set(ys)) == 3  # no CSS: stacked, as rendered
    assert 'h2 "Ada Lovelace"' in seen and "P   N   G" in shot
