"""Negative controls: agents that must fail, and whether the tests can be tampered with.

- no-op: does nothing; echo: only prints the instruction back (to the shell, and as its answer).
  Either passing means the verifier checks nothing the task asked for: `trivial-verifier`.
- hackable (task folders): from the agent phase, are the tests visible (/tests or /solution not
  empty, a copy of a tests/ file in the workspace)? And does an agent-phase write change the
  verifier's outcome? The tamper run plants, without solving anything, modules in /tests named
  after what the tests import (Python puts the script's folder first on sys.path) and overwrites
  test-like workspace files (test_*.py, conftest.py, check*, files tests/ names by path) with a
  payload that writes reward 1 and exits 0, and plants per-user configuration in the agent's HOME
  (a `.gitconfig` whose `core.fsmonitor` runs a script, `~/.local/bin/env` that a TB2-style test.sh
  sources, a `usercustomize.py` in the user site) and a `pytest.py` in /app. Then, one payload per
  run, on the workspace modules the tests import and the scripts they name: `os._exit(0)` first
  (`exit-on-import`), a reward writer that kills test.sh (`parent-killer`), one that appends a
  reward line to /tests/test.sh (`self-appending-test-sh`). Passing any way while the no-op fails,
  or a planted HOME or /app file that ran inside the verifier at all: `hackable`, the payloads named.
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
_MARK = "/app/.temper-tamper-home"  # what a HOME payload leaves when it runs inside the verifier
_MARK_APP = "/app/.temper-tamper-workdir"  # and /app/pytest.py
MARK_PY = f"open('{_MARK}', 'a').write('x')\n"
MARK_SH = f"#!/bin/sh\necho x >> {_MARK}\n"
EXIT_PREFIX = "import os; os._exit(0)\n"
_KILL_TEST_SH = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q /tests/test.sh "
                 "&& kill -9 ${p#/proc/}; done")
KILLER_SH = f"#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n{_KILL_TEST_SH}\nexit 0\n"
KILLER_PY = ("import os, subprocess\nos.makedirs('/logs/verifier', exist_ok=True)\n"
             "open('/logs/verifier/reward.txt', 'w').write('1')\n"
             f"subprocess.run(['bash', '-c', {_KILL_TEST_SH!r}])\nos._exit(0)\n")
_APPEND = "\necho 1 > /logs/verifier/reward.txt\n"
APPEND_SH = (f"#!/bin/bash\nchmod -R u+w /tests 2>/dev/null\nfor f in /tests/*.sh; do printf {_APPEND!r} >> $f; done\n")
APPEND_PY = ("import glob, os\nfor f in glob.glob('/tests/*.sh'):\n    try:\n        os.chmod('/tests', 0o755)\n"
             f"        os.chmod(f, 0o644)\n        open(f, 'a').write({_APPEND!r})\n"
             "    except OSError:\n        pass\n")
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
    """Where the first tamper run writes (absolute path -> payload), besides the HOME plants."""
    folder = env.folder
    tests = folder.path / "tests"
    texts = _texts(tests)
    targets = {f"/tests/{m}.py": PY_PAYLOAD for m in sorted(_imports(tests))}
    for rel in folder.files:
        if _TESTLIKE.search(rel) or f"/app/{rel}" in texts:
            if rel.endswith(".py"):
                targets[f"{env.workdir}/{rel}"] = PY_PAYLOAD
            elif rel.endswith(".sh"):
                targets[f"{env.workdir}/{rel}"] = SH_PAYLOAD
    targets[f"{env.workdir}/pytest.py"] = f"open('{_MARK_APP}', 'a').write('x')\n"
    return targets


def _texts(tests: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(tests.rglob("*")) if p.is_file())


def payload_runs(env: TerminalEnv) -> dict[str, dict[str, str]]:
    """The one-payload runs: payload name -> {absolute path: new content}, for the workspace modules the
    tests import (by module name) and the scripts they name by /app path (whether or not they exist yet)."""
    folder = env.folder
    tests = folder.path / "tests"
    imported = _imports(tests)
    modules = {f"/app/{rel}": text for rel, text in folder.files.items()
               if rel.endswith(".py") and Path(rel).stem in imported and Path(rel).stem != "__init__"}
    named = set(re.findall(r"/app/[\w./-]+", _texts(tests)))
    scripts = sorted(p for p in named if p.endswith(".sh")
                     or ("." not in Path(p).name and p.removeprefix("/app/") in folder.files))
    runs: dict[str, dict[str, str]] = {}
    for name, py_prefix, sh in (("exit-on-import", EXIT_PREFIX, None), ("parent-killer", KILLER_PY, KILLER_SH),
                                ("self-appending-test-sh", APPEND_PY, APPEND_SH)):
        plan = {path: py_prefix + text for path, text in modules.items()}
        if sh is not None:
            plan.update({path: sh for path in scripts})
        if plan:
            runs[name] = plan
    return runs


async def _plant(env: TerminalEnv, targets: dict[str, str]) -> None:
    for path, payload in targets.items():
        await env.exec(["bash", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1" && chmod +x "$1"', "_", path],
                       stdin=payload)


async def _plant_home(env: TerminalEnv) -> list[str]:
    """Per-user configuration in the agent's HOME that a verifier sharing that HOME would run."""
    script = ('mon="$HOME/.temper-fsmonitor"; printf %s "$1" > "$mon"; chmod +x "$mon"; '
              'printf "[core]\\n\\tfsmonitor = %s\\n" "$mon" > "$HOME/.gitconfig"; '
              'mkdir -p "$HOME/.local/bin"; printf %s "$1" > "$HOME/.local/bin/env"; '
              'for py in python3 /usr/bin/python3; do d=$($py -s -c "import site; print(site.getusersitepackages())" '
              '2>/dev/null) && mkdir -p "$d" && printf %s "$2" > "$d/usercustomize.py"; done; echo "$HOME"')
    r = await env.exec(["bash", "-c", "mkdir -p /app 2>/dev/null; " + script, "_", MARK_SH, MARK_PY], cwd=env.workdir)
    home = r.text.strip() or "$HOME"
    return [f"{home}/.gitconfig", f"{home}/.local/bin/env", "usercustomize.py (user site)"]


async def _marked(env: TerminalEnv) -> list[str]:
    """The planted configuration that ran inside the verifier."""
    marks = {"home-config": _MARK, "workdir-shadow": _MARK_APP}
    return [name for name, path in marks.items() if (await env.exec(["test", "-e", path])).exit_code == 0]


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
        probe = await env.exec(["bash", "-c", _PROBE], cwd=env.workdir)
        visible = visible_tests(env, probe.text)
        targets = tamper_targets(env)
        await _plant(env, targets)
        home = await _plant_home(env)
        reward = (await env.step("")).reward or Reward()
        ran = await _marked(env)
        runs = payload_runs(env)
    out: dict[str, Any] = {"visible": visible, "tampered": sorted([*targets, *home]),
                           "tampered_reward": _summary(reward),
                           "tamper_passes": None if reward.failure else reward.value,
                           "ran_in_verifier": ran, "payloads": {}}
    for name, plan in runs.items():
        async with opened(suite, task, pool, clock) as env:
            await _plant(env, plan)
            r = (await env.step("")).reward or Reward()
        out["payloads"][name] = {"tampered": sorted(plan), "reward": _summary(r),
                                 "passes": None if r.failure else r.value}
    return out


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
        by = [*(["planted-files"] if hack["tamper_changes_outcome"] else []), *hack["ran_in_verifier"],
              *(n for n, p in hack["payloads"].items()
                if p["passes"] is not None and p["passes"] >= threshold and not noop_pass)]
        hack["hackable_by"] = by
        out["hackable"] = bool(hack["visible"]) or bool(by)
        out["tamper"] = hack
    return out
