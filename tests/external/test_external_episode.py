"""External agent programs through run_episode: every call recorded (ids and logprobs as the endpoint
returned them, merged into one sequence, the loss mask exactly on the sampled tokens), the verifier's
reward, split segments for rewritten history, failure kinds, the timeout killing the program's whole
process group, and per-episode keys."""

import asyncio
import json
import os
import signal
import time

import pytest
from external_helpers import task_folder

from temper.agent.config import AgentConfig
from temper.envs import parse_spec
from temper.episode_runner import run_episode
from temper.trajectory import FailureKind

pytestmark = pytest.mark.e2e

CLIENT = """
import json, os, sys
import httpx, openai
client = openai.OpenAI(max_retries=0)
key = os.environ["OPENAI_API_KEY"]
def run(cmd):
    r = httpx.post(os.environ["TEMPER_EXEC_URL"], json={"command": cmd}, headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    return r.json()
"""


def _agent(argv: list[str], **over) -> AgentConfig:
    return AgentConfig(**{"kind": "external", "command": argv, "max_turn_tokens": 12, "temperature": 1.0, **over})


def _run(tiny_engine, smollm2_tokenizer, suite, cfg, seed=0, **kw):
    (task,) = suite.tasks()
    return asyncio.run(run_episode(tiny_engine, smollm2_tokenizer, suite, task, None, cfg, seed, **kw))


def test_an_openai_client_agent_is_recorded_merged_and_scored(tiny_engine, smollm2_tokenizer, terminal_suite,
                                                               program, tmp_path):
    dump = tmp_path / "seen.json"
    argv = program(CLIENT + f"""
    msgs = [{{"role": "system", "content": "You are terse."}},
            {{"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}}]
    seen = []
    for turn in range(3):
        r = client.chat.completions.create(model="any", messages=msgs, logprobs=True,
                                           extra_body={{"return_token_ids": True}})
        choice = r.choices[0]
        seen.append({{"ids": choice.model_extra["token_ids"], "prompt": choice.model_extra["prompt_token_ids"],
                      "logprobs": [t.logprob for t in choice.logprobs.content]}})
        msgs.append(choice.message.model_dump(exclude_none=True))
        out = run("echo ok > /app/done.txt && cat /app/done.txt")
        msgs.append({{"role": "user", "content": "Output: " + out["stdout"]}})
    json.dump(seen, open({str(dump)!r}, "w"))
    print("done")
    """.replace("\n    ", "\n"))
    sigint = signal.getsignal(signal.SIGINT)  # default_int_handler, or SIG_IGN under a shell's background job
    res = _run(tiny_engine, smollm2_tokenizer, terminal_suite, _agent(argv))
    assert res.failure is None and res.reward.value == 1.0, res.reward
    seen = json.loads(dump.read_text())
    (traj,) = res.trajectories  # three calls, one sequence: each prompt extends the last call's tokens
    info = traj.info
    assert (info["calls"], info["merges"], info["splits"], info["segments"]) == (3, 2, 0, 1)
    pos = 0
    for call in seen:
        assert traj.token_ids[:len(call["prompt"])] == call["prompt"]
        pos = len(call["prompt"])
        n = len(call["ids"])
        assert traj.token_ids[pos:pos + n] == call["ids"] and traj.loss_mask[pos:pos + n] == [1] * n
        assert traj.logprobs[pos:pos + n] == call["logprobs"]
        assert set(traj.versions[pos:pos + n]) == {0}
    assert sum(traj.loss_mask) == sum(len(c["ids"]) for c in seen)  # nothing but the sampled tokens is trained
    assert traj.token_ids[:pos + len(seen[-1]["ids"])] == traj.token_ids  # it ends with the last completion
    assert info["program"]["exit_code"] == 0 and "done" in info["program"]["stdout_tail"]
    assert signal.getsignal(signal.SIGINT) is sigint  # the endpoint left Ctrl-C alone
    assert [a.name for a in res.turns[-1].tool_calls] == ["exec"] * 3


def test_rewritten_history_is_split_into_segments_that_share_the_reward(tiny_engine, smollm2_tokenizer,
                                                                        terminal_suite, program):
    argv = program(CLIENT + """
    first = [{"role": "user", "content": os.environ["TEMPER_INSTRUCTION"]}]
    r = client.chat.completions.create(model="any", messages=first)
    summary = [{"role": "system", "content": "Summary so far: nothing done."}, {"role": "user", "content": "Go on."}]
    client.chat.completions.create(model="any", messages=summary)
    r = client.responses.create(model="any", input="Last step?", instructions="Be brief.")
    client.responses.create(model="any", input="And then?", instructions="Be brief.", previous_response_id=r.id)
    print(run("echo no > /app/done.txt")["exit_code"])
    """.replace("\n    ", "\n"))
    res = _run(tiny_engine, smollm2_tokenizer, terminal_suite, _agent(argv))
    assert res.failure is None and res.reward.value == 0.0  # scored: the program ran, the task is not done
    assert len(res.trajectories) == 3 and {t.reward for t in res.trajectories} == {0.0}
    info = res.trajectories[0].info
    # previous_response_id with the same instructions extends in place
    assert (info["calls"], info["splits"], info["merges"]) == (4, 2, 1)
    assert all(t.trainable for t in res.trajectories)


def test_a_program_that_fails_before_calling_the_model_is_an_infrastructure_failure(
        tiny_engine, smollm2_tokenizer, terminal_suite, program):
    argv = program("import sys\nprint('cannot find my config', file=sys.stderr)\nsys.exit(3)\n")
    res = _run(tiny_engine, smollm2_tokenizer, terminal_suite, _agent(argv))
    assert res.failure == FailureKind.AGENT_PROGRAM and not res.trajectories
    assert "never called the model" in res.reward.info["error"] and "code 3" in res.reward.info["error"]
    assert "cannot find my config" in res.reward.info["error"]


def test_a_hanging_program_is_killed_with_its_children_at_the_timeout(tiny_engine, smollm2_tokenizer,
                                                                      program, tmp_path):
    """The task's own agent timeout bounds the program, as it bounds the built-in loop.

    10 s, not less: on a loaded 2-core CI machine importing openai alone took over 3 s, and a program
    timed out before its first model call is (rightly) a broken program, not a truncated episode."""
    suite = parse_spec(f"terminal:path={task_folder(tmp_path / 'tasks', agent_timeout_s=10)}")
    pid_file = tmp_path / "child.pid"
    argv = program(CLIENT + f"""
    import subprocess, time
    client.chat.completions.create(model="any", messages=[{{"role": "user", "content": "hi"}}])
    child = subprocess.Popen(["sleep", "600"])
    open({str(pid_file)!r}, "w").write(str(child.pid))
    time.sleep(600)
    """.replace("\n    ", "\n"))
    start = time.monotonic()
    res = _run(tiny_engine, smollm2_tokenizer, suite, _agent(argv))
    assert time.monotonic() - start < 60
    assert res.failure is None and res.trajectories[0].truncated and res.trajectories[0].info["program"]["timed_out"]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the program's child survived its episode"


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"  # a zombie is dead, waiting for its reaper
    except FileNotFoundError:
        return False


def test_concurrent_episodes_cannot_reach_each_others_endpoint_or_sandbox(tiny_engine, smollm2_tokenizer,
                                                                          terminal_suite, program, tmp_path):
    """Each program publishes its URL and key, waits for the other's, then knocks on the other's
    endpoint with its own key and none; after both episodes end, its own endpoint refuses it too."""
    source = CLIENT + f"""
    import pathlib, time
    me, other = sys.argv[1], sys.argv[2]
    client.chat.completions.create(model="any", messages=[{{"role": "user", "content": "hi"}}])
    pathlib.Path({str(tmp_path)!r}, me).write_text(json.dumps({{"exec": os.environ["TEMPER_EXEC_URL"], "key": key,
                                                                 "base": os.environ["OPENAI_BASE_URL"]}}))
    while not pathlib.Path({str(tmp_path)!r}, other).exists():
        time.sleep(0.05)
    theirs = json.loads(pathlib.Path({str(tmp_path)!r}, other).read_text())
    codes = [httpx.post(theirs["exec"], json={{"command": "echo ok > /app/done.txt"}},
                        headers={{"Authorization": f"Bearer {{key}}"}}).status_code,
             httpx.get(theirs["base"] + "/models", headers={{"Authorization": f"Bearer {{key}}"}}).status_code,
             httpx.post(os.environ["TEMPER_EXEC_URL"], json={{"command": "true"}}).status_code]
    pathlib.Path({str(tmp_path)!r}, me + ".codes").write_text(json.dumps(codes))
    time.sleep(0.5)  # let the other finish its knocks before this episode (and its endpoint) ends
    """.replace("\n    ", "\n")
    a, b = program(source, "a.py"), program(source, "b.py")

    async def both():
        (task,) = terminal_suite.tasks()
        return await asyncio.gather(*(run_episode(tiny_engine, smollm2_tokenizer, terminal_suite, task, None,
                                                  _agent([*argv, me, other]), 0)
                                      for argv, me, other in ((a, "A", "B"), (b, "B", "A"))))

    sigint = signal.getsignal(signal.SIGINT)
    res = asyncio.run(both())
    assert all(r.failure is None and r.reward.value == 0.0 for r in res)  # neither wrote into the other's sandbox
    assert signal.getsignal(signal.SIGINT) is sigint  # no finished endpoint holds Ctrl-C
    for me in ("A", "B"):
        assert json.loads((tmp_path / f"{me}.codes").read_text()) == [401, 401, 401]
    import httpx

    theirs = json.loads((tmp_path / "A").read_text())
    try:
        late = httpx.post(theirs["exec"], json={"command": "true"},
                          headers={"Authorization": f"Bearer {theirs['key']}"}, timeout=5).status_code
    except httpx.TransportError:
        late = "refused"  # the endpoint is gone with its episode
    assert late in (401, "refused")
    assert not os.environ.get("OPENAI_API_KEY", "").startswith("sk-episode-")


def test_the_memory_limit_holds_the_program(tiny_engine, smollm2_tokenizer, terminal_suite, program):
    """agent.memory_mb caps the program's address space: an allocation past it fails in the program."""
    argv = program(CLIENT + """
    client.chat.completions.create(model="any", messages=[{"role": "user", "content": "hi"}])
    try:
        block = bytearray(600 * 1024 * 1024)
        print("allocated")
    except MemoryError:
        print("refused")
    """.replace("\n    ", "\n"))
    res = _run(tiny_engine, smollm2_tokenizer, terminal_suite, _agent(argv, memory_mb=400))
    assert res.failure is None and res.answer == "refused"
    roomy = _run(tiny_engine, smollm2_tokenizer, terminal_suite, _agent(argv, memory_mb=4096))
    assert roomy.answer == "allocated"


def test_a_marked_text_format_is_enforced(tiny_engine, smollm2_tokenizer, terminal_suite, program):
    argv = program(CLIENT + """
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    r = client.responses.create(model="any", input="Is it done?", text={"format": {
        "type": "json_schema", "name": "verdict", "schema": schema, "strict": True}})
    print(r.output_text)
    """.replace("\n    ", "\n"))
    res = _run(tiny_engine, smollm2_tokenizer, terminal_suite,
               _agent(argv, max_turn_tokens=60, constrained_requests="mark"))
    assert res.failure is None and json.loads(res.answer) in ({"ok": True}, {"ok": False}), res.answer
    assert res.trajectories[0].info["constrained"] == ["text.format"]  # kept out of the loss (docs/agents.md)
