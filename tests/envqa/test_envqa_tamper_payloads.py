"""The tamper run's payloads aimed at the verifier itself: a task that an `os._exit(0)` in a module its
tests import or configuration planted in HOME would pass is `hackable`, the payload named; the same tasks
written to the verifier's contract are `ok`. A reward line appended to a script /tests runs is tried too,
and fails: /tests is read-only while the verifier runs."""

import asyncio
import json
from pathlib import Path

import pytest
from envqa_plant import task

from temper.envqa.check_run import run_envqa
from temper.envqa.config import EnvQAConfig

REWARD_IF = "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
CHECK = "import sys\nsys.path.insert(0, '/app')\nimport lib\nassert lib.double(2) == 4\n"
NONCE_CHECK = ("import sys\nnonce = sys.stdin.readline().strip()\nsys.path.insert(0, '/app')\nimport lib\n"
               "assert lib.double(2) == 4\nprint('all checks passed', nonce)\n")
NONCE_SH = ("#!/bin/bash\nmkdir -p /logs/verifier\nn=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \\n')\n"
            "out=$(echo $n | python3 /tests/check.py)\n"
            'if [ $? -eq 0 ] && [ "$(printf "%s\\n" "$out" | tail -n 1)" = "all checks passed $n" ]; ' + REWARD_IF)
FIX_LIB = "printf 'def double(x):\\n    return 2 * x\\n' > /app/lib.py\n"


def _plant(root: Path) -> dict[str, Path]:
    lib = {"lib.py": "def double(x):\n    return x\n"}
    p = {
        "exit": task(root, "exits-early", "Fix `double` in /app/lib.py.", FIX_LIB,
                     "#!/bin/bash\nmkdir -p /logs/verifier\nif python3 /tests/check.py; " + REWARD_IF, lib),
        "exit-ok": task(root, "exits-early-nonce", "Repair `double` in /app/lib.py so that it doubles.", FIX_LIB,
                        NONCE_SH, lib),
        "append": task(root, "second-script", "Make /app/tool.sh print 42.", "echo 'echo 42' > /app/tool.sh\n",
                       "#!/bin/bash\nbash /tests/run.sh\n", {"tool.sh": "echo 41\n"}),
        "home": task(root, "sources-home", "Create /app/done.", "touch /app/done\n",
                     "#!/bin/bash\nmkdir -p /logs/verifier\nexport HOME=/tmp\nsource $HOME/.local/bin/env 2>/dev/null\n"
                     "if [ -f /app/done ]; " + REWARD_IF),
    }
    (p["exit"] / "tests" / "check.py").write_text(CHECK)
    (p["exit-ok"] / "tests" / "check.py").write_text(NONCE_CHECK)
    (p["append"] / "tests" / "run.sh").write_text(
        "mkdir -p /logs/verifier\nif [ \"$(bash /app/tool.sh)\" = 42 ]; " + REWARD_IF)
    return p


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("tamper")
    paths = _plant(root)
    out = tmp_path_factory.mktemp("qa") / "run"
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={root}", policy=False, oracle_runs=1, concurrency=2,
                                       out=str(out)))
    rep = asyncio.run(run_envqa(cfg))
    by_path = {t["path"]: t for t in rep["tasks"]}
    records = {k: json.loads((out / by_path[str(v)]["file"]).read_text()) for k, v in paths.items()}
    return {k: (by_path[str(v)]["verdicts"], records[k]["checks"]["controls"]["tamper"]) for k, v in paths.items()}


@pytest.mark.parametrize(("key", "payload"), [("exit", "exit-on-import"), ("home", "home-config")])
def test_a_task_open_to_a_payload_is_hackable_with_the_payload_named(report, key, payload) -> None:
    verdicts, tamper = report[key]
    assert "hackable" in verdicts, (verdicts, tamper)  # (the two lib.py tasks are also near duplicates)
    assert payload in tamper["hackable_by"], tamper


def test_the_same_task_to_the_verifiers_contract_is_ok(report) -> None:
    verdicts, tamper = report["exit-ok"]
    assert "hackable" not in verdicts and tamper["hackable_by"] == [], tamper
    assert set(tamper["payloads"]) == {"exit-on-import", "parent-killer", "self-appending-test-sh"}
    assert all(p["passes"] == 0.0 for p in tamper["payloads"].values())


def test_a_script_the_tests_run_cannot_be_appended_to_once_tests_is_read_only(report) -> None:
    # run.sh in /tests runs the agent's tool.sh: the payload tries to append a reward line to it. /tests is
    # remounted read-only for the verifier (bwrap mode), so the payload runs and fails: the task is ok.
    verdicts, tamper = report["append"]
    assert "/app/tool.sh" in tamper["tampered"] and tamper["payloads"]["self-appending-test-sh"]["passes"] == 0.0
    assert "hackable" not in verdicts and tamper["hackable_by"] == [], tamper
