"""The web suite: pages verified by rendering them in a real headless Chromium inside the task's image (Debian's
chromium and playwright, the base that `FROM mcr.microsoft.com/playwright/python:*` maps to). The oracle scores 1
on every component, doing nothing 0, and a page with the right content but no layout gets exactly the
components that hold for how it renders."""

import asyncio
import shutil

import pytest

from temper.envs import parse_spec
from temper.images.config import PLAYWRIGHT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]

UNSTYLED = """<!doctype html><html><body><h1>Our team</h1>
<div class="card"><h2>Ada Lovelace</h2><p>Engineer</p></div>
<div class="card"><h2>Grace Hopper</h2><p>Admiral</p></div>
<div class="card"><h2>Alan Turing</h2><p>Scientist</p></div></body></html>"""


@pytest.fixture(scope="module")
def suite():
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    s = parse_spec("web")
    s.tasks()  # builds the images (once; kept by content)
    return s


def test_every_web_task_scores_its_oracle_1_and_a_no_op_0(suite):
    tasks = suite.tasks()
    assert tasks and all(t.suite == "web" and "image" in t.payload for t in tasks)

    async def both(task):
        return await suite.run_oracle(task), await suite.run_noop(task)

    for task in tasks:
        oracle, noop = asyncio.run(both(task))
        assert oracle.ok and oracle.value == 1.0 and set(oracle.components.values()) == {1.0}, (
            task.payload["name"], oracle.components, oracle.info.get("test_output"))
        assert noop.ok and noop.value == 0.0, (task.payload["name"], noop.components)


NO_COUNT = "sed -i 's|<p id=\"count\">Items: 0</p>||' /app/index.html && sed -i '/count.textContent/d' /app/list.js"
# The checker rewrites sales.csv (six regions, new figures): a chart of the five rows the agent saw, copied in, fails.
CHART_FROM_CONSTANTS = ("sed -i 's|^fetch(\"sales.csv\")|Promise.resolve(\"region,sales\\\\nNorth,120\\\\nSouth,45\\\\n"
                        "East,300\\\\nWest,210\\\\nCentral,90\")|; s|^  .then((res) => res.text())||' /app/chart.js")
PARTIAL = {  # task: (what the page is made of, the components its rendering earns)
    "web-team-cards": (f"cat > /app/index.html <<'HTML'\n{UNSTYLED}\nHTML", {  # no CSS: a column at any width
        "heading": 1.0, "cards": 1.0, "wide_row": 0.0, "narrow_column": 1.0, "borders": 0.0,
        "no_console_errors": 1.0}),
    "web-bar-chart": (CHART_FROM_CONSTANTS, {  # the oracle's chart, over numbers copied into the page
        "svg": 1.0, "bars": 0.0, "proportional": 0.0, "baseline": 0.0, "no_overlap": 0.0, "labels": 0.0,
        "no_console_errors": 1.0}),
    "web-item-list": (NO_COUNT, {  # the oracle's page without its counter: typing and clicking still work
        "labelled_input": 1.0, "add": 1.0, "clears_input": 1.0, "blank_ignored": 1.0, "enter_adds": 1.0,
        "remove": 1.0, "count": 0.0, "no_console_errors": 1.0}),
}


@pytest.mark.parametrize("name", sorted(PARTIAL))
def test_a_page_scores_what_its_rendering_shows(suite, name):
    task = next(t for t in suite.tasks() if t.payload["name"] == name)
    make, expected = PARTIAL[name]

    async def partial():
        async with suite.make_env(task) as env:
            await env.reset()
            if name != "web-team-cards":  # the oracle's page, then spoilt
                await env.run_solution()
            assert (await env.exec(make)).exit_code == 0
            reward = await env.verify()
            shot = await env.exec("head -c 8 /logs/verifier/screenshot.png | od -An -c")
            return reward, shot.text

    reward, shot = asyncio.run(partial())
    assert reward.components == expected, reward.info.get("test_output")
    assert reward.value == pytest.approx(sum(expected.values()) / len(expected))
    assert "P   N   G" in shot  # the render it was judged on is kept


def test_the_browser_base_pins_the_playwright_the_tests_use():
    import tomllib
    from pathlib import Path

    deps = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = [d for group in deps["project"]["optional-dependencies"].values() for d in group if "playwright" in d]
    assert pins == [PLAYWRIGHT], pins


def test_envqa_says_ok_for_every_web_task(suite, tmp_path):
    """Rendering is deterministic enough to reproduce: the oracle passes twice alike, no-op and echo fail, and
    the resource fit is measured in the browser image (its memory peak from the sandbox, no Python wrapper)."""
    from temper.envqa import EnvQAConfig, run_envqa

    cfg = EnvQAConfig.from_recipe(dict(suite="web", policy=False, oracle_runs=2, concurrency=2, out=str(tmp_path)))
    report = asyncio.run(run_envqa(cfg))
    names = sorted(t.payload["name"] for t in suite.tasks())
    assert {t["path"].rsplit("/", 1)[-1]: t["verdicts"] for t in report["tasks"]} == {n: ["ok"] for n in names}
    for t in report["tasks"]:
        assert t["oracle"]["passes"] == 2 and t["oracle"]["agree"] and t["trivial"] is False
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
