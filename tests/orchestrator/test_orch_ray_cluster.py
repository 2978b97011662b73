"""The Ray backend on a cluster of several nodes, started here with the ray CLI on 127.0.0.1: actors
go where the resources they ask for are, a sandbox pool runs on a node of its own (the episodes'
sandbox calls and the audit log are there), `temper train` runs on the cluster, and a node killed
mid-run leaves a finished run whose lost episodes were retried on the workers left. Trainer ranks
(world_size 2) go to the node with the `trainer` resource and train as one process does; a killed
rank actor is one line naming it."""

import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from orch_helpers import metrics, run_tiny, tiny_config

from temper.net import free_port

ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")

pytestmark = [pytest.mark.slow, pytest.mark.e2e]
BIN = Path(sys.executable).parent
# Fast node-death detection (defaults take ~30 s): the head's GCS health-checks raylets every 0.5 s.
RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "RAY_health_check_period_ms": "500",
           "RAY_health_check_timeout_ms": "1000", "RAY_health_check_failure_threshold": "3", "HF_HUB_OFFLINE": "1"}


class Cluster:
    """Ray nodes on this machine, each a `ray start --block` process of its own (stopped by PID, with
    every process it started: `ray stop` would stop other tests' clusters too)."""

    def __init__(self, logs: Path):
        self.port, self.logs = free_port(), logs
        self.temp = tempfile.mkdtemp(prefix="trc", dir="/tmp")  # short: Ray's socket paths live under it
        self.procs: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, **RAY_ENV}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start_node(self, name: str, resources: dict[str, float], cpus: int, head: bool = False) -> None:
        # the head's client server port too: its default (10001) is one per machine
        where = ["--head", "--port", str(self.port), "--ray-client-server-port", str(free_port()),
                 "--include-dashboard=false"] if head else ["--address", self.address]
        cmd = [str(BIN / "ray"), "start", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1",
               "--num-cpus", str(cpus), "--resources", json.dumps(resources), "--temp-dir", self.temp, *where]
        with open(self.logs / f"ray-{name}.log", "w") as log:
            self.procs[name] = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                                start_new_session=True)

    def wait_nodes(self, count: int, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        while len([n for n in ray.nodes() if n["Alive"]]) < count:
            dead = [k for k, p in self.procs.items() if p.poll() is not None]
            assert not dead and time.monotonic() < deadline, f"ray nodes {dead} stopped; see {self.logs}/ray-*.log"
            time.sleep(0.5)

    def node_id(self, resource: str) -> str:
        """The id of the live node that offers `resource`."""
        return next(n["NodeID"] for n in ray.nodes() if n["Alive"] and resource in n["Resources"])

    def kill(self, name: str) -> None:
        """SIGKILL the node's processes, by PID (the raylet, its workers and agents): a lost machine."""
        p = self.procs.pop(name)
        try:
            victims = [*psutil.Process(p.pid).children(recursive=True), psutil.Process(p.pid)]
        except psutil.NoSuchProcess:
            return
        for v in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                v.kill()
        p.wait(timeout=30)

    def stop(self) -> None:
        for name in reversed(list(self.procs)):
            self.kill(name)
        shutil.rmtree(self.temp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A head (sandbox and drill resources) and a rollout node (two rollout slots, two trainer rank slots)."""
    os.environ.update({k: v for k, v in RAY_ENV.items() if k.startswith("RAY_AUTH")})
    c = Cluster(tmp_path_factory.mktemp("ray-cluster"))
    try:
        c.start_node("head", {"head_res": 1, "sandbox": 2, "drill": 1}, cpus=2, head=True)
        deadline = time.monotonic() + 240
        while True:  # the head is up when a driver can join it
            try:
                ray.init(address=c.address, log_to_driver=False)
                break
            except (ConnectionError, RuntimeError):
                assert c.procs["head"].poll() is None and time.monotonic() < deadline, f"head did not start: {c.logs}"
                time.sleep(1)
        c.start_node("rollout", {"rollout": 2, "trainer": 2}, cpus=2)
        c.wait_nodes(2)
        yield c
    finally:
        ray.shutdown()
        c.stop()


def _train(cluster: Cluster, toy_model: Path, out: Path, **over: Any) -> subprocess.Popen:
    """`temper train` (the CLI, a driver of its own) on the cluster: the tiny recipe, no evaluations."""
    cfg = tiny_config(toy_model, out, orchestrator__backend="ray", orchestrator__ray__address=cluster.address,
                      eval={"suite": None}, **over)
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    log = open(out.parent / f"{out.name}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen([str(BIN / "temper"), "train", "--config", str(path)], env=cluster.env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)


def _finish(proc: subprocess.Popen, out: Path, timeout: float = 600) -> dict[str, Any]:
    try:
        rc = proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    log = (out.parent / f"{out.name}.log").read_text()
    assert rc == 0, log[-3000:]
    return json.loads((out / "summary.json").read_text())


@pytest.mark.timeout(600)
def test_actors_go_where_their_resources_are(cluster: Cluster, toy_model: Path, tmp_path: Path) -> None:
    from temper.engine import EngineConfig
    from temper.envs.sandboxes import episode_config
    from temper.envs.suites.arithmetic import ToySuite
    from temper.errors import TemperError
    from temper.orchestrator.backends.ray import RayBackend
    from temper.orchestrator.config import TrainConfig
    from temper.orchestrator.ray_config import RayConfig
    from temper.orchestrator.rollout_worker import WorkerSpec
    from temper.sandbox import SandboxConfig, verify
    from temper.sandbox.remote_pool import RemotePoolSpec, RemoteSandboxPool
    from temper.sandbox.remote_pool_actor import node_audit_dir

    spec = WorkerSpec.of(TrainConfig.from_recipe({"agent": {"max_turn_tokens": 1}}))
    engine = EngineConfig(kv_budget_bytes=16_000_000)
    with pytest.raises(TemperError, match=r"orchestrator\.ray\.worker_resources=\{'gpu_node': 1.0\}"):
        RayBackend(str(toy_model), engine, ["toy:n=4"], spec, 1,
                   ray_cfg=RayConfig(address=cluster.address, worker_resources={"gpu_node": 1}))
    rollout_node, head_node = cluster.node_id("rollout"), cluster.node_id("head_res")
    cfg = RayConfig(address=cluster.address, worker_resources={"rollout": 1}, remote_sandboxes=1,
                    sandbox_resources={"sandbox": 1}, sandbox_pool_size=1)
    backend = RayBackend(str(toy_model), engine, ["toy:n=4,sandbox=true"], spec, 2,
                         SandboxConfig(run_dir=tmp_path / "sandbox"), ray_cfg=cfg)
    try:
        assert backend.nodes == [rollout_node, rollout_node]
        pool = backend.sandbox_where[0]
        assert pool["node_id"] == head_node and pool["pid"] not in backend.pids
        task = ToySuite(n=4).tasks()[0]
        for worker in (0, 1):  # each episode's sandbox comes from the pool on the head
            ok = asyncio.run(backend.run_episode(worker, 0, task.id, "g", worker))
            assert ok.failure is None and ok.trajectories, ok.message
        _use_every_call(RemoteSandboxPool(RemotePoolSpec(episode_config(), backend.sandbox_pools)), tmp_path)
    finally:
        backend.close()
    audit = node_audit_dir(tmp_path / "sandbox", head_node) / "sandbox-audit.jsonl"
    assert pool["audit"] == str(audit) and verify(audit)[0]
    ops = [r["op"] for r in map(json.loads, audit.read_text().splitlines())]
    assert {"exec", "write_file", "read_file", "list_files", "upload", "reset"} <= set(ops)  # all ran there
    assert ops.count("create") + ops.count("reset") >= 3  # the episodes' sandboxes too
    assert not (tmp_path / "sandbox" / "sandbox-audit.jsonl").exists()  # nothing ran beside the workers


def _use_every_call(pool: Any, tmp_path: Path) -> None:
    """Every call environments make, through the pool actor: folders go by content, errors come back as such."""
    from temper.sandbox import SandboxError

    tpl, tests = tmp_path / "template", tmp_path / "tests"
    tpl.mkdir()
    tests.mkdir()
    (tpl / "a.txt").write_text("from the template")
    (tests / "t.py").write_text("print(6 * 7)")
    sb = pool.acquire(tpl)
    try:
        assert sb.read_file("a.txt") == b"from the template"
        sb.write_file("b.txt", "hi")
        assert {e.path for e in sb.list_files()} >= {"a.txt", "b.txt"}
        sb.upload(tests, "/tests")
        r = sb.exec(["python3", "/tests/t.py"])
        assert (r.exit_code, r.stdout) == (0, b"42\n"), r
        sb.reset()
        assert "b.txt" not in {e.path for e in sb.list_files()}
        with pytest.raises(SandboxError):  # the sandbox's own error, raised here as there
            sb.read_file("missing.txt")
    finally:
        pool.release(sb)


@pytest.mark.timeout(900)
def test_temper_train_runs_on_the_cluster_with_remote_sandboxes(cluster: Cluster, toy_model: Path,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = _train(cluster, toy_model, out, max_steps=2, orchestrator__num_workers=1,
                  suites=[{"spec": "toy:n=64,seed=0,digits=2,sandbox=true", "max_concurrency": 16}],
                  orchestrator__ray__worker_resources={"rollout": 1}, orchestrator__ray__remote_sandboxes=1,
                  orchestrator__ray__sandbox_resources={"sandbox": 1})
    summary = _finish(proc, out)
    assert summary["steps"] == 2 and summary["backend"] == "ray"
    audit = out / "sandbox" / "nodes" / cluster.node_id("head_res")[:12] / "sandbox-audit.jsonl"
    ops = [r["op"] for r in map(json.loads, audit.read_text().splitlines())]
    assert ops.count("reset") >= summary["training"]["episodes"] // 2  # released episode sandboxes, reset there
    assert not (out / "sandbox" / "sandbox-audit.jsonl").exists()


@pytest.mark.timeout(900)
def test_a_node_lost_mid_run_has_its_episodes_retried(cluster: Cluster, toy_model: Path, tmp_path: Path) -> None:
    cluster.start_node("doomed", {"drill": 1}, cpus=1)  # with the head's drill slot: one worker on each
    cluster.wait_nodes(3)
    out = tmp_path / "run"
    proc = _train(cluster, toy_model, out, max_steps=12, orchestrator__num_workers=2,
                  orchestrator__ray__worker_resources={"drill": 1})
    try:
        deadline = time.monotonic() + 600
        while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip():
            assert proc.poll() is None, (out.parent / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no step finished"
            time.sleep(0.2)
        _wait_in_flight(out / "store.sqlite", groups=2, deadline=deadline)
        cluster.kill("doomed")  # mid-run: the first step is done, groups in flight on both workers
        summary = _finish(proc, out)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    training = summary["training"]
    assert summary["steps"] == 12, summary
    assert training["retries"] > 0 and training.get("failures_worker_error", 0) > 0, training
    assert not summary["quarantined"], summary["quarantined"]  # retried elsewhere, never a task's fault


def _wait_in_flight(db_path: Path, groups: int, deadline: float) -> None:
    """Until `groups` groups are in flight. Groups go round robin in start order, so two in flight
    are (as good as always) on both workers; right after a step the producer can be idle, held by
    the staleness bound, and a node killed then has nothing to retry (seen in CI)."""
    import sqlite3

    db = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=5)
    try:
        while db.execute("SELECT COUNT(DISTINCT group_id) FROM trajectories WHERE status='in_flight'"
                         ).fetchone()[0] < groups:
            assert time.monotonic() < deadline, "no groups in flight"
            time.sleep(0.01)
    finally:
        db.close()


# synchronous (staleness 0), no refills: a run with 2 ranks trains on the rollouts 1 process would
SYNC = {"orchestrator__group_size": 8, "orchestrator__batch_groups": 2, "orchestrator__max_staleness": 0,
        "orchestrator__concurrency": 16, "orchestrator__max_refills": 0}


def _audit_start(out: Path) -> dict[str, Any]:
    return next(a for a in map(json.loads, (out / "audit.jsonl").read_text().splitlines()) if a["kind"] == "start")


def _gone(pids: list[int], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.timeout(600)
def test_trainer_ranks_go_where_trainer_resources_are(cluster: Cluster, toy_model: Path, tmp_path: Path) -> None:
    out, one = tmp_path / "ranks", tmp_path / "one"
    proc = _train(cluster, toy_model, out, max_steps=2, algorithm__trainer__world_size=2,
                  orchestrator__ray__trainer_resources={"trainer": 1}, **SYNC)
    summary = _finish(proc, out)
    assert summary["steps"] == 2 and summary["backend"] == "ray"
    started = _audit_start(out)
    trainer_node = cluster.node_id("trainer")
    assert started["trainer_world_size"] == 2 and started["trainer_nodes"] == [trainer_node, trainer_node]
    assert len(set(started["trainer_pids"])) == 2 and proc.pid not in started["trainer_pids"]
    assert _gone(started["trainer_pids"]), "rank actors outlived their run"
    for r in (0, 1):  # each rank's log, in the run folder, shows its two steps (a step with no signal is skipped)
        assert (out / "trainer" / f"rank_{r}.log").read_text().count("step -> version ") == 2
    final = out / "checkpoints" / (out / "checkpoints" / "latest").read_text().strip()  # named by optimizer steps
    version = json.loads((final / "meta.json").read_text())["policy_version"]
    assert version >= 1  # at least one of the two steps trained
    assert sorted(p.name for p in (final / "dcp").glob("*.distcp")) == ["__0_0.distcp", "__1_0.distcp"]
    # the same steps as one trainer in one process on the same rollouts
    run_tiny(toy_model, one, max_steps=2, eval={"suite": None}, **SYNC)
    for a, b in zip(metrics(one), metrics(out), strict=True):
        assert b.get("trainer/tokens") == a.get("trainer/tokens") and b["reward"] == a["reward"]
        assert b.get("trainer/loss") == pytest.approx(a.get("trainer/loss"), rel=1e-4, abs=1e-6)  # None: skipped
    # --resume: new rank actors load the shards the last ones wrote into the run folder, and go on
    res = subprocess.run([str(BIN / "temper"), "train", "--resume", str(out), "--set", "max_steps=3"],
                         env=cluster.env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    resumed = next(a for a in map(json.loads, (out / "audit.jsonl").read_text().splitlines()) if a["kind"] == "resume")
    assert resumed["trainer_nodes"] == [trainer_node, trainer_node] and resumed["checkpoint"] == final.name
    assert _gone(resumed["trainer_pids"]), "rank actors outlived their run"
    assert f"loaded {final} (policy version {version})" in (out / "trainer" / "rank_1.log").read_text()
    assert [r["step"] for r in metrics(out)] == [1, 2, 3] and metrics(out)[-1]["train_version"] == version


@pytest.mark.timeout(300)
def test_impossible_trainer_resources_fail_before_any_rank_starts(cluster: Cluster, tmp_path: Path) -> None:
    from temper.errors import TemperError
    from temper.orchestrator.ray_config import RayConfig
    from temper.orchestrator.ray_trainer_group import RayTrainerGroup
    from temper.rl import RLConfig

    groups = len(ray.util.placement_group_table())
    with pytest.raises(TemperError) as err:  # two nodes' worth of "trainer" slots is 2, not 3
        RayTrainerGroup("unused", RLConfig(), 3, tmp_path / "logs",
                        ray_cfg=RayConfig(address=cluster.address, trainer_resources={"trainer": 1}))
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("orchestrator.ray.trainer_resources={'trainer': 1.0}: "), msg
    assert "room for 2 of the 3" in msg, msg
    with pytest.raises(TemperError, match=r"^orchestrator\.ray\.trainer_resources=\{\}: runtime\.device=cuda needs "
                                          r"one GPU per trainer rank"):
        RayTrainerGroup("unused", RLConfig(), 2, tmp_path / "logs", device="cuda",
                        ray_cfg=RayConfig(address=cluster.address))
    with pytest.raises(ValueError, match="resource amounts must be >= 0 \\(trainer\\)"):
        RayConfig(trainer_resources={"trainer": -1})
    assert not (tmp_path / "logs").exists() and len(ray.util.placement_group_table()) == groups


@pytest.mark.timeout(300)
def test_a_killed_rank_actor_is_one_line_naming_it(cluster: Cluster, toy_model: Path, tmp_path: Path) -> None:
    from temper.errors import TemperError
    from temper.orchestrator.ray_config import RayConfig
    from temper.orchestrator.ray_trainer_group import RayTrainerGroup
    from temper.rl import RLConfig

    group = RayTrainerGroup(str(toy_model), RLConfig(), 2, tmp_path / "logs",
                            ray_cfg=RayConfig(address=cluster.address, trainer_resources={"trainer": 1}))
    try:
        node = cluster.node_id("trainer")
        ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node)
        assert group.nodes == [node, node] and group.master.startswith(f"{ip}:")  # rank 0's node, not the driver's
        assert group.policy_state_dict()  # a collective over both ranks: they are up and joined
        victim = group.pids[1]
        psutil.Process(victim).kill()
        with pytest.raises(TemperError) as err:
            group._call("policy_state_dict")
        msg = str(err.value)
        assert "\n" not in msg, msg
        assert msg.startswith(f"trainer rank 1 (pid {victim}, node {node[:12]} at {ip}) died ("), msg
        assert f"{tmp_path / 'logs' / 'rank_1.log'}: " in msg and "rank 1/2" in msg, msg  # its last log lines
        assert group.actors == [] and _gone(group.pids)  # every rank stopped
    finally:
        group.close()
