"""Negative controls: agents that must fail, and whether the tests can be tampered with.

- no-op: does nothing; echo: only prints the instruction back (to the shell, and as its answer).
  Either passing means the verifier checks nothing the task asked for: `trivial-verifier`.
- hackable (task folders): from the agent phase, are the tests visible (/tests or /solution not
  empty, a copy of a tests/ file in the workspace)? And does an agent-phase write change the
  verifier's outcome? The tamper run plants, without solving anything, modules in /tests named
  after what the tests import (Python puts the script's folder first on sys.path) and overwrites
  test-like workspace files (test_*.py, conftest.py, check*, files tests/ names by path) with a
  payload that writes reward 1 and exits 0. Passing that way while the no-op fails: `hackable`.
"""

import ast
import re
from pathlib import Path
from typing import Any

from temper.envqa.checks.oracle import passed
from temper.envqa.checks.session import Clock, opened
from temper.envs.reward import Reward
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.suite import Suite
from temper.envs.suites.terminal import TerminalEnv
from temper.envs.task import Task

PY_PAYLOAD = ("import os\nos.makedirs('/logs/verifier', exist_ok=True)\n"
              "open('/logs/verifier/reward.txt', 'w').write('1')\nos._exit(0)\n")
SH_PAYLOAD = "#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; exit 0\n"
_TESTLIKE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test\.\w+|conftest\.py|(check|verify|grade|judge)[^/]*)$", re.I)
_PROBE = """for d in /tests /solution; do
  if [ -n "$(ls -A "$d" 2>/dev/null)" ]; then echo "visible $d: $(ls -A "$d" | head -5 | tr '\\n' ' ')"; fi
done"""


def _summary(reward: Reward) -> dict[str, Any]:
    return {"value": reward.value, "failure": reward.failure.value if reward.failure else None}


async def run_control(suite: Suite, task: Task, pool: Any, clock: Clock, echo: bool) -> Reward:
    async with opened(suite, task, pool, clock) as env:
        if not echo:
            return await env.run_noop()
        if isinstance(env, SandboxEnv) and env.sandbox is not None:
            await env.exec(["cat"], stdin=task.prompt)
        return (await env.step(task.prompt)).reward or Reward()


def _imports(tests: Path) -> set[str]:
    names: set[str] = set()
    for p in tests.rglob("*.py"):
        try:
            tree = ast.parse(p.read_text())
        except (SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return names - {"sys", "builtins"} - {p.stem for p in tests.rglob("*.py")}


def tamper_targets(env: TerminalEnv) -> dict[str, str]:
    """Where the tamper run writes (absolute path -> payload)."""
    folder = env.folder
    tests = folder.path / "tests"
    texts = "\n".join(p.read_text(errors="replace") for p in tests.rglob("*") if p.is_file())
    targets = {f"/tests/{m}.py": PY_PAYLOAD for m in sorted(_imports(tests))}
    for rel in folder.files:
        if _TESTLIKE.search(rel) or f"/app/{rel}" in texts:
            if rel.endswith(".py"):
                targets[f"/app/{rel}"] = PY_PAYLOAD
            elif rel.endswith(".sh"):
                targets[f"/app/{rel}"] = SH_PAYLOAD
    return targets


def visible_tests(env: TerminalEnv, probe_out: str) -> list[str]:
    found = [line for line in probe_out.splitlines() if line.startswith("visible")]
    tests = env.folder.path / "tests"
    copies = {p.read_bytes(): str(p.relative_to(env.folder.path)) for p in tests.rglob("*") if p.is_file()}
    for rel, text in env.folder.files.items():
        if (src := copies.get(text.encode())) is not None:
            found.append(f"/app/{rel} is a copy of {src}")
    return found


async def check_hackable(suite: Suite, task: Task, pool: Any, clock: Clock) -> dict[str, Any] | None:
    async with opened(suite, task, pool, clock) as env:
        if not isinstance(env, TerminalEnv):
            return None  # single-turn suites: the agent never reaches the verifier's files
        probe = await env.exec(["bash", "-c", _PROBE], cwd="/app")
        visible = visible_tests(env, probe.text)
        targets = tamper_targets(env)
        for path, payload in targets.items():
            await env.exec(["bash", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "_", path], stdin=payload)
        reward = (await env.step("")).reward or Reward()
    return {"visible": visible, "tampered": sorted(targets), "tampered_reward": _summary(reward),
            "tamper_passes": None if reward.failure else reward.value}


async def check_controls(suite: Suite, task: Task, pool: Any, threshold: float, clock: Clock) -> dict[str, Any]:
    noop = await run_control(suite, task, pool, clock, echo=False)
    echo = await run_control(suite, task, pool, clock, echo=True)
    noop_pass = passed(_summary(noop) | {"components": {}}, threshold)
    out: dict[str, Any] = {"noop": _summary(noop), "echo": _summary(echo),
                           "trivial": noop_pass or passed(_summary(echo) | {"components": {}}, threshold)}
    hack = await check_hackable(suite, task, pool, clock)
    out["hackable"] = False
    if hack is not None:
        tamper_pass = hack["tamper_passes"] is not None and hack["tamper_passes"] >= threshold
        hack["tamper_changes_outcome"] = tamper_pass and not noop_pass
        out["hackable"] = bool(hack["visible"]) or hack["tamper_changes_outcome"]
        out["tamper"] = hack
    return out
