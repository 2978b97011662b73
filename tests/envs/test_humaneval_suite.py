"""HumanEval: all 164 canonical solutions pass in the sandbox, wrong answers fail."""

import asyncio

from temper.envs.registry import parse_spec

WRONG_WHOLE = """Here is my solution:
```python
def has_close_elements(numbers, threshold):
    return False
```"""
RIGHT_WHOLE = """```python
def has_close_elements(numbers: List[float], threshold: float) -> bool:
    s = sorted(numbers)
    return any(b - a < threshold for a, b in zip(s, s[1:]))
```
Example:
```python
print(has_close_elements([1.0, 2.0], 0.5))
```"""


def test_all_164_canonical_solutions_pass_and_a_wrong_answer_fails() -> None:
    suite = parse_spec("humaneval")
    tasks = suite.tasks()
    assert len(tasks) == 164 and len({t.id for t in tasks}) == 164
    rewards = asyncio.run(suite.run_oracles())
    assert [r.value for r in rewards] == [1.0] * 164, [t.payload["task_id"] for t, r in zip(tasks, rewards, strict=True)
                                                      if r.value != 1.0]
    wrong = asyncio.run(suite.run_oracles(tasks[:20], answers=["    return None\n"] * 20))
    assert all(r.value == 0.0 and r.ok and r.info["error"] for r in wrong)


def test_one_episode_whole_function_and_body_answers() -> None:
    suite = parse_spec("humaneval")
    task = suite.tasks()[0]
    assert "def has_close_elements" in task.prompt and "check(" not in task.prompt  # tests stay hidden

    async def episode(answer: str) -> float:
        async with suite.make_env(task) as env:
            await env.reset()
            return (await env.step(answer)).reward.value

    assert asyncio.run(episode(RIGHT_WHOLE)) == 1.0
    assert asyncio.run(episode(WRONG_WHOLE)) == 0.0
    assert asyncio.run(suite.run_oracle(task)).value == 1.0  # the body-only canonical completion


def test_a_program_is_failed_by_the_cpu_it_burns_not_by_a_loaded_host() -> None:
    """The runner's limit is CPU time: a spinning program is stopped with a line that says so, while a
    program that waits (as a correct one does on a busy host) for longer than its CPU budget still passes."""
    from temper.envs.sandboxes import as_provider
    from temper.envs.suites.humaneval import check_programs

    async def run() -> list:
        provider = as_provider(None)
        sb = await provider.acquire()
        try:
            return await check_programs(sb, ["while True: pass\n", "import time\ntime.sleep(1.5)\n"], cpu_s=1)
        finally:
            await provider.release(sb)

    spin, wait = asyncio.run(run())
    assert spin.value == 0.0 and spin.info["error"] == "used more than 1s of CPU", spin.info
    assert wait.value == 1.0, wait.info
