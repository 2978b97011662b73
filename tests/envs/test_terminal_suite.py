"""Terminal tasks: every shipped oracle passes in the sandbox and every no-op fails; the folder
format is checked; verifier outcomes (reward.json, timeouts, crashes) are reported as such."""

import asyncio

import pytest

from temper.envs.registry import parse_spec
from temper.envs.sandboxes import make_pool
from temper.envs.taskfolder import TaskFolderError, load_task_folder
from temper.trajectory import FailureKind


async def _run_all(suite, pool, concurrency: int = 4):
    sem = asyncio.Semaphore(concurrency)

    async def one(task, mode):
        async with sem:
            run = suite.run_oracle if mode == "oracle" else suite.run_noop
            return task.payload["name"], mode, await run(task, pool)

    return await asyncio.gather(*(one(t, m) for t in suite for m in ("oracle", "noop")))


def test_every_shipped_oracle_passes_and_every_noop_fails() -> None:
    suite = parse_spec("terminal")
    assert len(suite) >= 25
    categories = {t for task in suite for t in task.tags}
    assert {"text-processing", "file-system", "data-wrangling", "debugging", "shell-scripting", "git"} <= categories
    with make_pool(size=4) as pool:  # warm sandboxes, reset between episodes
        results = asyncio.run(_run_all(suite, pool))
        assert pool.stats["warm"] > 0
    bad = [(n, m, r.value, r.failure, r.info.get("test_output", "")[-200:]) for n, m, r in results
           if r.failure is not None or r.value != (1.0 if m == "oracle" else 0.0)]
    assert not bad, bad


def test_ids_are_content_hashes_and_content_is_exposed() -> None:
    a, b = parse_spec("terminal").tasks(), parse_spec("terminal").tasks()
    assert [t.id for t in a] == [t.id for t in b] and len({t.id for t in a}) == len(a)
    csv_task = next(t for t in a if t.payload["name"] == "text-csv-column-sum")
    assert "sales.csv" in csv_task.payload["files"] and "amount" in csv_task.content()
    assert csv_task.oracle.startswith("#!/bin/bash") and csv_task.difficulty == "easy"


def test_agent_phase_cannot_see_tests_or_solution_and_verifier_sees_agent_work(task_folder) -> None:
    folder = task_folder(files={"data.txt": "x\n"})
    suite = parse_spec(f"terminal:path={folder}")
    (task,) = suite.tasks()

    async def episode():
        async with suite.make_env(task) as env:
            await env.reset()
            r = await env.exec("ls /app; find /tests /solution -mindepth 1 | wc -l")
            assert r.stdout.decode().split() == ["data.txt", "0"]
            await env.exec("echo agent > /app/done.txt")
            return (await env.step("")).reward

    assert asyncio.run(episode()).value == 1.0


def test_reward_json_components_and_dockerfile_note(task_folder, caplog) -> None:
    write_json = "mkdir -p /logs/verifier\necho '{\"correct\": 1, \"style\": 0.5}' > /logs/verifier/reward.json\n"
    folder = task_folder(test_sh=write_json,
                         files={"Dockerfile": "FROM ubuntu\nRUN apt-get install -y curl\n"})
    suite = parse_spec(f"terminal:path={folder},images=off")  # images=on builds it (tests/images)
    (task,) = suite.tasks()
    assert task.payload["dockerfile_ignored"] and "Dockerfile" not in task.payload["files"]
    r = asyncio.run(suite.run_noop(task))
    assert r.value == 0.75 and r.components == {"correct": 1.0, "style": 0.5}
    assert any("Dockerfile is not executed" in rec.message for rec in caplog.records)


def test_a_test_sh_that_does_not_finish_with_a_reward_is_the_agents_zero(task_folder) -> None:
    # after the agent phase only the agent's work can keep test.sh from writing a reward in time (a broken
    # task fails its oracle: temper envqa): a 0 with a flag, never a masked infrastructure failure
    silent = task_folder(name="silent", test_sh="exit 0\n")
    r = asyncio.run(parse_spec(f"terminal:path={silent}").run_noop(parse_spec(f"terminal:path={silent}").tasks()[0]))
    assert r.ok and r.value == 0.0 and r.info["verifier_broken_by_agent"] and "wrote no" in r.info["error"]
    # a test.sh that never finishes, agent or not, is the task's fault: its control run times out too
    slow = task_folder(name="slow", test_sh="sleep 30\n", toml="[verifier]\ntimeout_sec = 1\n")
    suite = parse_spec(f"terminal:path={slow}")
    r = asyncio.run(suite.run_noop(suite.tasks()[0]))
    assert r.failure == FailureKind.TASK_BROKEN and "clean" in r.info["error"], r
    assert r.info["clean_verify_s"] is None and not r.info.get("verifier_broken_by_agent")


def test_sandbox_killed_before_the_verifier_is_a_sandbox_crash(task_folder, killer) -> None:
    suite = parse_spec(f"terminal:path={task_folder()}")

    async def episode():
        async with suite.make_env(suite.tasks()[0]) as env:
            await env.reset()
            killer(env.sandbox)
            return (await env.step("")).reward

    r = asyncio.run(episode())
    assert r.failure == FailureKind.SANDBOX_CRASH and not r.ok


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (lambda d: (d / "instruction.md").unlink(), "missing instruction.md"),
        (lambda d: (d / "tests" / "test.sh").unlink(), "missing tests/test.sh"),
        (lambda d: (d / "solution" / "solve.sh").unlink(), "missing solution/solve.sh"),
        (lambda d: (d / "instruction.md").write_text("  \n"), "instruction.md is empty"),
        (lambda d: (d / "task.toml").write_text("[metadata\n"), "task.toml is not valid TOML"),
        (lambda d: (d / "task.toml").write_text("[agent]\ntimeout_sec = 'soon'\n"), "agent.timeout_sec must be"),
        (lambda d: (d / "task.toml").write_text("[metadata]\ntags = 'x'\n"), "metadata.tags must be a list"),
    ],
)
def test_malformed_task_folders_give_one_line_naming_the_folder(task_folder, break_it, message) -> None:
    folder = task_folder()
    break_it(folder)
    with pytest.raises(TaskFolderError) as exc:
        load_task_folder(folder)
    assert str(folder) in str(exc.value) and message in str(exc.value) and "\n" not in str(exc.value)
