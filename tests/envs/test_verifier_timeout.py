"""A verifier that runs past its timeout after the agent phase: the agent's 0 when a clean run of the task
verifies well inside that time (recorded by an oracle run, else a control run on a fresh sandbox), the
task's fault when the clean run times out too (quarantined, not retried), the host's when it comes close
(docs/envs.md, the verifier's contract). Scripted agents, real sandboxes."""

import asyncio
import uuid

from temper.envs import verify_record
from temper.envs.registry import parse_spec
from temper.trajectory import FailureKind

# test.sh reads what the agent left at /app/out.txt: a fifo there hangs it (no agent code runs at all)
READS = ("mkdir -p /logs/verifier\ncat /app/out.txt > /dev/null 2>&1\n{extra}"
         "if [ -f /app/done.txt ]; then echo 1 > /logs/verifier/reward.txt; "
         "else echo 0 > /logs/verifier/reward.txt; fi\n")
HANG = "mkfifo /app/out.txt && touch /app/done.txt"


def _suite(task_folder, extra: str = "", timeout: float = 2):
    # a marker of its own gives every test a task digest of its own (records live per digest)
    folder = task_folder(test_sh=READS.format(extra=extra), toml=f"[verifier]\ntimeout_sec = {timeout}\n",
                         files={"marker": uuid.uuid4().hex})
    suite = parse_spec(f"terminal:path={folder}")
    return suite, suite.tasks()[0]


def _episode(suite, task, attack: str):
    async def run():
        async with suite.make_env(task) as env:
            await env.reset()
            assert (await env.exec(attack, cwd="/app")).exit_code == 0
            return (await env.step("")).reward

    return asyncio.run(run())


def test_a_hang_the_agent_caused_is_its_zero_after_a_control_run(task_folder) -> None:
    suite, task = _suite(task_folder)
    digest = suite.folders[task.payload["path"]].digest
    assert verify_record.recorded(digest, 2.0) is None
    reward = _episode(suite, task, HANG)
    assert reward.ok and reward.value == 0.0 and reward.info["verifier_broken_by_agent"], reward
    assert reward.info["clean_verify_source"] == "control" and reward.info["clean_verify_s"] < 1.0
    rec = verify_record.recorded(digest, 2.0)
    assert rec is not None and rec.source == "control" and rec.fits  # the control's time is kept for the task
    # control: the same task without the attack scores 1, not masked
    reward = _episode(suite, task, "echo x > /app/out.txt && touch /app/done.txt")
    assert reward.ok and reward.value == 1.0


def test_an_oracle_runs_record_spares_the_control_run(task_folder) -> None:
    suite, task = _suite(task_folder)
    assert asyncio.run(suite.run_oracle(task)).value == 1.0  # as env QA and `temper eval --oracle` run it
    digest = suite.folders[task.payload["path"]].digest
    assert verify_record.recorded(digest, 2.0).source == "oracle"
    reward = _episode(suite, task, HANG)
    assert reward.ok and reward.value == 0.0 and reward.info["clean_verify_source"] == "oracle", reward
    assert verify_record.recorded(digest, 2.0).source == "oracle"  # no control ran


def test_a_verifier_that_hangs_on_a_clean_run_too_is_the_tasks_fault(task_folder) -> None:
    suite, task = _suite(task_folder, extra="sleep 30\n", timeout=1)
    reward = _episode(suite, task, "touch /app/done.txt")
    assert reward.failure == FailureKind.TASK_BROKEN and "clean control run too" in reward.info["error"], reward
    assert not reward.info.get("verifier_broken_by_agent")
    record = verify_record._root() / f"{suite.folders[task.payload['path']].digest}.json"
    seen = record.stat().st_mtime_ns
    reward = _episode(suite, task, "touch /app/done.txt")  # the next episode reads the record: no second control
    assert reward.failure == FailureKind.TASK_BROKEN and record.stat().st_mtime_ns == seen


def test_a_clean_run_close_to_the_timeout_leaves_the_blame_with_the_host(task_folder) -> None:
    # a clean run takes ~1.2 s of 2 s (over half): a timeout after the agent cannot be told from a slow host
    suite, task = _suite(task_folder, extra="sleep 1.2\n", timeout=2)
    reward = _episode(suite, task, HANG)
    assert reward.failure == FailureKind.HARNESS_TIMEOUT and "too close" in reward.info["error"], reward
    assert reward.info["clean_verify_s"] >= 1.0
