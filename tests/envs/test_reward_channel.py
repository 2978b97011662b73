"""The reward channel, tried as an adversary would: scripted agents (no model) attack the verifier of
shipped tasks and of task folders made here; each attack scores the agent's 0 (never a 1, never masked as
an infrastructure failure), and the same task without the attack scores as expected (docs/envs.md, the
verifier's contract; docs/sandbox.md, the reward channel)."""

import asyncio
import json
from pathlib import Path

import pytest

from temper.envs.registry import parse_spec

PWNED = "/app/.pwned"  # every payload leaves this behind if it ever runs inside the verifier
KILL_TEST_SH = ("for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null | grep -q /tests/test.sh "
                "&& kill -9 ${p#/proc/}; done")


def _episode(suite, task, attack: str) -> tuple:
    async def run():
        async with suite.make_env(task) as env:
            await env.reset()
            r = await env.exec(attack, cwd="/app")
            assert r.exit_code == 0, r.stderr.decode()
            reward = (await env.step("")).reward
            pwned = (await env.exec(f"test -e {PWNED}")).exit_code == 0
            return reward, pwned

    return asyncio.run(run())


@pytest.fixture(scope="module")
def shipped():
    suite = parse_spec("terminal")
    return suite, {t.payload["name"]: t for t in suite}


def _shipped(shipped, name: str, attack: str):
    suite, tasks = shipped
    return _episode(suite, tasks[name], attack)


def _solve(shipped, name: str) -> str:
    return shipped[1][name].oracle


def test_os_exit_in_a_module_the_tests_import_is_a_zero(shipped) -> None:
    attack = "sed -i '1i import os; os._exit(0)' /app/repo/mathutil.py"
    reward, _ = _shipped(shipped, "fix-test-range-sum", attack)
    assert reward.ok and reward.value == 0.0, reward
    # control: the real fix, and the real fix with the planted exit (the tests never reach their end)
    assert _shipped(shipped, "fix-test-range-sum", _solve(shipped, "fix-test-range-sum"))[0].value == 1.0
    reward, _ = _shipped(shipped, "fix-test-range-sum", _solve(shipped, "fix-test-range-sum") + "\n" + attack)
    assert reward.ok and reward.value == 0.0


def test_a_script_that_writes_the_reward_and_kills_test_sh_is_a_zero(shipped) -> None:
    script = f"#!/bin/bash\necho 1 > /logs/verifier/reward.txt; touch {PWNED}; {KILL_TEST_SH}\nsleep 5\n"
    attack = f"cat > /app/fizzbuzz.sh <<'X'\n{script}X\nchmod +x /app/fizzbuzz.sh"
    reward, pwned = _shipped(shipped, "shell-fizzbuzz-script", attack)
    assert pwned  # the tests ran it: the payload did run, and still scored nothing
    assert reward.ok and reward.value == 0.0 and reward.info["verifier_broken_by_agent"], reward
    assert "signal" in reward.info["error"]
    assert _shipped(shipped, "shell-fizzbuzz-script", _solve(shipped, "shell-fizzbuzz-script"))[0].value == 1.0


def test_appending_to_test_sh_while_bash_runs_it_changes_nothing(shipped) -> None:
    script = ("#!/bin/bash\nchmod u+w /tests /tests/test.sh 2>/dev/null\n"
              "echo 'echo 1 > /logs/verifier/reward.txt' >> /tests/test.sh && touch /app/.appended\necho 1\n")
    attack = f"cat > /app/fizzbuzz.sh <<'X'\n{script}X\nchmod +x /app/fizzbuzz.sh"
    reward, _ = _shipped(shipped, "shell-fizzbuzz-script", attack)
    assert reward.ok and reward.value == 0.0, reward


def test_a_home_gitconfig_does_not_reach_the_tests_git(shipped) -> None:
    monitor = f"#!/bin/sh\ntouch {PWNED}\necho 1 > /logs/verifier/reward.txt\n"
    attack = (f"cat > /tmp/monitor.sh <<'X'\n{monitor}X\nchmod +x /tmp/monitor.sh\n"
              "printf '[core]\\n\\tfsmonitor = /tmp/monitor.sh\\n' > $HOME/.gitconfig")
    reward, pwned = _shipped(shipped, "git-commit-changes", attack)
    assert not pwned and reward.ok and reward.value == 0.0, reward
    in_repo = attack.replace("> $HOME/.gitconfig", ">> /app/project/.git/config")  # the repository's own config
    reward, pwned = _shipped(shipped, "git-commit-changes", in_repo)
    assert not pwned and reward.ok and reward.value == 0.0, reward
    solve = _solve(shipped, "git-commit-changes")
    assert _shipped(shipped, "git-commit-changes", attack + "\n" + solve)[0].value == 1.0  # control, same config


PAYLOAD_PY = f"import os\nopen('{PWNED}', 'w').close()\nos._exit(0)\n"
CHECK_PY = "import sys; sys.exit(0 if open('/app/answer').read().strip() == '42' else 1)"


@pytest.mark.parametrize(
    ("name", "test_sh", "attack"),
    [
        ("pytest-shadow",  # a pytest.py in the working folder shadows `python3 -m pytest`
         "cd /app\nif python3 -m pytest -q -p no:cacheprovider /tests/test_check.py; then r=1; else r=0; fi\n",
         f"cat > /app/pytest.py <<'X'\n{PAYLOAD_PY}X"),
        ("usercustomize",  # the user site of /usr/bin/python3 under the agent's HOME
         f"cd /app\nif /usr/bin/python3 -c \"{CHECK_PY}\"; then r=1; else r=0; fi\n",
         "d=$(/usr/bin/python3 -c 'import site; print(site.getusersitepackages())') && mkdir -p $d && "
         f"cat > $d/usercustomize.py <<'X'\n{PAYLOAD_PY}X"),
        ("home-env-file",  # a TB2-style test.sh sources an env file from $HOME
         f"cd /app\nsource $HOME/.local/bin/env 2>/dev/null\nif python3 -c \"{CHECK_PY}\"; then r=1; else r=0; fi\n",
         f"mkdir -p $HOME/.local/bin && printf 'touch {PWNED}; echo 1 > /logs/verifier/reward.txt; exit 0\\n' "
         "> $HOME/.local/bin/env"),
    ],
)
def test_the_agents_home_and_working_folder_do_not_reach_the_verifier(task_folder, name, test_sh, attack) -> None:
    folder = task_folder(name=name, test_sh="mkdir -p /logs/verifier\n" + test_sh
                         + "echo $r > /logs/verifier/reward.txt\n")
    (folder / "tests" / "test_check.py").write_text(
        "def test_answer():\n    assert open('/app/answer').read().strip() == '42'\n")
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()
    reward, pwned = _episode(suite, task, attack)
    assert not pwned and reward.ok and reward.value == 0.0, reward
    reward, pwned = _episode(suite, task, attack + "\necho 42 > /app/answer")  # control: solved, same plant
    assert not pwned and reward.ok and reward.value == 1.0, reward


COPY_REWARD = "mkdir -p /logs/verifier\ncp /app/reward.{ext} /logs/verifier/reward.{ext}\n"


@pytest.mark.parametrize(("ext", "text"), [("txt", "nan"), ("txt", "Infinity"), ("txt", "-inf"), ("txt", "5"),
                                           ("txt", "1e300"), ("txt", "one"), ("json", '{"reward": NaN}'),
                                           ("json", '{"reward": 5}'), ("json", '{"a": 1, "b": Infinity}')])
def test_rewards_that_are_not_numbers_in_range_are_a_zero(task_folder, ext, text) -> None:
    folder = task_folder(test_sh=COPY_REWARD.format(ext=ext))
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()
    reward, _ = _episode(suite, task, f"printf '%s' '{text}' > /app/reward.{ext}")
    assert reward.ok and reward.value == 0.0, reward
    assert reward.info.get("verifier_broken_by_agent") or reward.info.get("reward_out_of_range") is not None


@pytest.mark.parametrize(("ext", "text", "value"), [("txt", "1", 1.0), ("txt", "0.25", 0.25),
                                                    ("json", json.dumps({"reward": 0.5, "style": 1}), 0.5)])
def test_rewards_in_range_are_kept(task_folder, ext, text, value) -> None:
    folder = task_folder(test_sh=COPY_REWARD.format(ext=ext))
    suite = parse_spec(f"terminal:path={folder}")
    reward, _ = _episode(suite, suite.tasks()[0], f"printf '%s' '{text}' > /app/reward.{ext}")
    assert reward.ok and reward.value == value and not reward.info.get("verifier_broken_by_agent")


def test_a_test_sh_that_ends_without_a_reward_or_is_hung_by_a_fifo_is_a_zero(task_folder) -> None:
    reads = ("mkdir -p /logs/verifier\ncat /app/out.txt > /dev/null\n"
             "if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; fi\n")
    folder = task_folder(test_sh=reads, toml="[verifier]\ntimeout_sec = 2\n")
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()
    reward, _ = _episode(suite, task, "mkfifo /app/out.txt && touch /app/done.txt")
    assert reward.ok and reward.value == 0.0 and reward.info["verifier_broken_by_agent"], reward
    reward, _ = _episode(suite, task, "echo x > /app/out.txt")  # no done.txt: test.sh writes no reward
    assert reward.ok and reward.value == 0.0 and reward.info["verifier_broken_by_agent"], reward
    reward, _ = _episode(suite, task, "echo x > /app/out.txt && touch /app/done.txt")  # control
    assert reward.ok and reward.value == 1.0


def test_filling_the_shared_scratch_space_leaves_the_verifier_room_to_write(task_folder) -> None:
    logs_first = ("set -e\nmkdir -p /logs/verifier\nseq 1 50000 > /logs/verifier/output.txt\n"
                  "if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; "
                  "else echo 0 > /logs/verifier/reward.txt; fi\n")
    folder = task_folder(test_sh=logs_first, toml="[environment]\nstorage_mb = 32\n")
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()
    # the sandbox's disk (workspace, /tmp) and /logs full to a few pages short: a failed attempt must not
    # become a masked one, and the verifier, on a filesystem of its own emptied for it, still writes its 0
    fill = ("for d in /tmp /logs; do dd if=/dev/zero of=$d/fill bs=64K 2>/dev/null; "
            "dd if=/dev/zero of=$d/f2 bs=1 2>/dev/null; truncate -s -8K $d/fill; done; true")
    reward, _ = _episode(suite, task, fill)
    assert reward.ok and reward.value == 0.0 and not reward.info.get("verifier_broken_by_agent"), reward
    reward, _ = _episode(suite, task, fill + "; touch /app/done.txt")  # solved, then filled: still a 1
    assert reward.ok and reward.value == 1.0, reward
    reward, _ = _episode(suite, task, "touch /app/done.txt")  # control
    assert reward.ok and reward.value == 1.0


def _pytest_template() -> str:
    """The pytest-based test.sh docs/envs.md gives as the template."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "envs.md").read_text()
    start = doc.index("# tests/test.sh of a pytest-based task")
    return "#!/bin/bash\n" + doc[start:doc.index("```", start)]


def test_the_docs_pytest_template_fails_an_early_exit_and_passes_a_solution(task_folder) -> None:
    folder = task_folder(test_sh=_pytest_template())
    tests = "import sys\nsys.path.insert(0, '/app')\n\n" + "".join(
        f"def test_{i}():\n    import lib\n    assert lib.double({i}) == {2 * i}\n\n" for i in range(4))
    (folder / "tests" / "test_outputs.py").write_text(tests)
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()
    fix = "printf 'def double(x):\\n    return 2 * x\\n' > /app/lib.py"
    exit_early = "printf 'import os\\nos._exit(0)\\n' > /app/lib.py"
    assert _episode(suite, task, fix)[0].value == 1.0  # control
    reward, _ = _episode(suite, task, exit_early)
    assert reward.ok and reward.value == 0.0, reward
    reward, _ = _episode(suite, task, "printf 'def double(x):\\n    return x\\n' > /app/lib.py")
    assert reward.ok and reward.value == 0.0, reward
