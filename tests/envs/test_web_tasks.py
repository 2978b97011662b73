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
def image_tools():
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)


@pytest.fixture(scope="module")
def suite(image_tools):
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
    """Each case (tests/envs/web_partial/<name>.json): the oracle's page spoilt (or a page of its own), and the
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
    from temper.agent.tools import BUILTIN, ToolContext, ToolError

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
            with pytest.raises(ToolError, match="width: 10 is outside"):
                await BUILTIN["render"](ctx, {"page": "index.html", "width": 10})
            return seen, shot.text

    seen, shot = asyncio.run(look())
    assert seen.startswith("exit code 0\nindex.html at 900 px wide: HTTP 200, title 'Our team'"), seen
    assert "oops is not defined" in seen  # the console error the page raised
    cards = [line for line in seen.splitlines() if line.strip().startswith("div.card at")]
    ys = [int(line.split("at (")[1].split(",")[1].split(")")[0]) for line in cards]
    assert len(cards) == 3 and ys == sorted(ys) and len(set(ys)) == 3  # no CSS: stacked, as rendered
    assert 'h2 "Ada Lovelace"' in seen and "P   N   G" in shot


def test_the_docs_example_web_task_passes_envqa_as_written(image_tools, tmp_path):
    """docs/envs.md's `temper envqa` command on examples/envs/web, as written (from a folder holding examples/)."""
    import os
    import re
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    (command,) = [b for b in re.findall(r"```bash\n(.*?)```", (root / "docs" / "envs.md").read_text(), re.S)
                  if "web:path=examples/envs/web" in b]
    (tmp_path / "examples").symlink_to(root / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", "-e", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (task,) = json.loads((tmp_path / "envqa-web" / "report.json").read_text())["tasks"]
    assert task["verdicts"] == ["ok"] and task["oracle"]["passes"] == 3 and task["hackable"] is False


def test_the_verifiers_browser_has_only_the_sandboxes_loopback_and_ends_with_its_verification(image_tools):
    """A page that calls out (to a server on this machine's 127.0.0.1, to an address on the internet) gets
    nothing: the browser sees the sandbox's own loopback only. And no browser process outlives the check."""
    import http.server
    import threading

    example = Path(__file__).resolve().parents[2] / "examples" / "envs" / "web"
    web = parse_spec(f"web:path={example}")
    (task,) = web.tasks()
    hits = []

    class Counted(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(204)
            self.end_headers()

    host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Counted)
    threading.Thread(target=host.serve_forever, daemon=True).start()
    # no-cors: a fetch that reaches a server resolves (an opaque answer); only one that cannot connect fails
    calls_out = (f"<script>for (const u of ['http://127.0.0.1:{host.server_address[1]}/', 'http://93.184.215.14/'])"
                 f" fetch(u, {{mode: 'no-cors'}}).then(() => console.log('reached ' + u));</script>")

    async def run():
        async with web.make_env(task) as env:
            await env.reset()
            await env.run_solution()
            assert (await env.exec(["bash", "-c", "cat >> /app/index.html"], stdin=calls_out, user="root")).ok
            reward = await env.verify()
            left = await env.exec("for p in /proc/[0-9]*; do cat $p/stat; echo; done 2>/dev/null", user="root")
            return reward, left.text

    try:
        reward, procs = asyncio.run(run())
    finally:
        host.shutdown()
    assert reward.components["text"] == 1.0 and reward.components["no_console_errors"] == 0.0
    assert reward.info["test_output"].count("Failed to fetch") == 2 and hits == []
    # (comm, state) of each process; a zombie has ended and waits for the sandbox's init to reap it
    running = [line.split("(", 1)[1].rsplit(") ", 1) for line in procs.splitlines() if "(" in line]
    assert not [comm for comm, rest in running if comm.startswith("chrom") and not rest.startswith("Z")], procs


def test_the_expected_tool_is_found_in_what_the_agents_sandbox_ran(image_tools, tmp_path):
    """[metadata] tools: looked for as words in the agent's commands and shell keys (the audit log), from the
    episode's start; the oracle's solve.sh (not the agent) and a mention inside another word do not count."""
    example = Path(__file__).resolve().parents[2] / "examples" / "envs" / "web" / "web-status-badge"
    folder = tmp_path / "tasks" / "badge"
    shutil.copytree(example, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('tags = ["web", "css"]', 'tags = ["web", "css"]\ntools = ["sassc"]'))
    web = parse_spec(f"web:path={tmp_path / 'tasks'}")
    (task,) = web.tasks()

    async def episode(commands, keys=None):
        async with web.make_env(task) as env:
            await env.reset()
            await env.run_solution()
            for c in commands:
                await env.exec(c)
            if keys:
                await asyncio.to_thread(env.sandbox.shell, keys)
            return (await env.verify()).info

    used = asyncio.run(episode(["echo '$x: red; a { color: $x; }' > t.scss && sassc t.scss t.css"]))
    assert used["tools_used"] == ["sassc"] and used["expected_tool_used"] is True
    typed = asyncio.run(episode([], keys="sassc --version\n"))
    assert typed["expected_tool_used"] is True  # typed into the interactive shell
    none = asyncio.run(episode(["echo sasscx; cat /usr/share/doc/sassc-notes 2>/dev/null; true"]))
    assert none["tools_used"] == [] and none["expected_tool_used"] is False
    assert none["category"] == "layout" and none["tools_expected"] == ["sassc"]
