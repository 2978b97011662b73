"""Fixtures of the dashboard tests: real folders (the tiny recipe's run with its eval folders, an external
agent's run whose episodes exec in a sandbox), `temper dashboard` as a real process, headless Chromium.

Screenshots go to the test's tmp folder; with TEMPER_SCREENSHOTS=docs/img they are written there too
(how docs/img/dashboard-*.png were made)."""

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from dashboard_helpers import make_tool_run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def toy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from temper.models.toy import make_toy_model

    return make_toy_model(tmp_path_factory.mktemp("toy") / "model")


@pytest.fixture(scope="session")
def runs_root(tmp_path_factory: pytest.TempPathFactory, toy_model: Path) -> Path:
    """runs/: `tiny` (the tiny recipe, 4 steps, held-out eval before and after) and `tools` (2 steps of an
    external agent that runs a shell command in each episode's sandbox: real tool calls)."""
    sys.path.insert(0, str(ROOT / "tests" / "orchestrator"))
    from orch_helpers import run_tiny

    root = tmp_path_factory.mktemp("dash") / "runs"
    run_tiny(toy_model, root / "tiny", max_steps=4)
    make_tool_run(toy_model, root / "tools", root.parent / "tasks")
    return root


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Module-scoped, not session: playwright's sync API keeps an event loop running in this thread while it
    is open, so every later test's asyncio.run() would fail ("cannot be called from a running event loop")."""
    from playwright.sync_api import sync_playwright

    exe = os.environ.get("TEMPER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "no chromium on PATH: bash scripts/setup.sh --with-browser installs Debian's"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    context.close()
    assert not errors, f"JavaScript errors on the page: {errors}"


@pytest.fixture
def dashboard() -> Iterator[Callable[..., str]]:
    """Factory: dashboard(*folders) starts `temper dashboard FOLDERS --port 0` and returns its URL; each
    process is stopped by its PID at the end."""
    procs: list[subprocess.Popen] = []

    def start(*folders: Path) -> str:
        proc = subprocess.Popen([sys.executable, "-m", "temper", "dashboard", *map(str, folders), "--port", "0"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                start_new_session=True)
        procs.append(proc)
        line = proc.stdout.readline() if proc.stdout else ""
        assert line.startswith("temper dashboard on "), (line, proc.stderr.read() if proc.stderr else "")
        url = line.split(" on ", 1)[1].split()[0].rstrip("/")
        import httpx

        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/", timeout=2)
                return url
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
                time.sleep(0.1)

    yield start
    for proc in procs:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def screenshot(tmp_path: Path) -> Callable[..., Path]:
    """screenshot(page, name) -> the PNG (in tmp_path; also in $TEMPER_SCREENSHOTS when set)."""
    def shoot(pg, name: str) -> Path:
        path = tmp_path / f"dashboard-{name}.png"
        pg.screenshot(path=str(path), full_page=False)
        assert path.stat().st_size > 10_000, f"{path}: a blank page?"
        if os.environ.get("TEMPER_SCREENSHOTS"):
            out = ROOT / os.environ["TEMPER_SCREENSHOTS"]
            out.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, out / path.name)
        return path

    return shoot
