"""Task folders in the Harbor layout whose environment/Dockerfile gives their episodes a root filesystem (the
terminal suite's images=on): for each, the oracle scores 1 and doing nothing scores 0, and `temper envqa`'s
checks say ok. Each exercises what the host-filesystem sandbox could not do: a server the oracle starts in the
background that the verifier reaches on 127.0.0.1, apt-get install at agent time, useradd + chown, the image's
ENV PATH and WORKDIR, a 700 MiB file under memory_mb = 512, a worker that keeps writing after its command."""

import asyncio
import shutil
from pathlib import Path

import pytest

from temper.envqa import EnvQAConfig, run_envqa
from temper.envs import parse_spec

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1200)]
TASKS = Path(__file__).parent / "tasks"
NAMES = sorted(p.name for p in TASKS.iterdir() if (p / "task.toml").is_file())


@pytest.fixture(scope="module")
def suite():
    if not (shutil.which("podman") and shutil.which("mmdebstrap")):  # scripts/setup.sh --with-images
        pytest.fail("podman and mmdebstrap are needed: bash scripts/setup.sh --with-images", pytrace=False)
    s = parse_spec(f"terminal:path={TASKS}")
    s.tasks()  # builds the images (once; kept by content)
    return s


def test_each_image_task_scores_its_oracle_1_and_a_no_op_0(suite):
    tasks = {t.payload["name"]: t for t in suite.tasks()}
    assert sorted(tasks) == NAMES and len(NAMES) == 6
    assert all("image" in t.payload and "dockerfile_ignored" not in t.payload for t in tasks.values())

    async def both(task):
        return await suite.run_oracle(task), await suite.run_noop(task)

    for name, task in tasks.items():
        oracle, noop = asyncio.run(both(task))
        assert oracle.ok and oracle.value == 1.0, (name, oracle.info.get("test_output"), oracle.info.get("error"))
        assert noop.ok and noop.value == 0.0, (name, noop.info)


def test_envqa_says_ok_for_every_image_task(suite, tmp_path):
    cfg = EnvQAConfig.from_recipe(dict(suite=f"terminal:path={TASKS}", policy=False, oracle_runs=1, concurrency=2,
                                       out=str(tmp_path / "qa")))
    report = asyncio.run(run_envqa(cfg))
    verdicts = {Path(t["path"]).name: t["verdicts"] for t in report["tasks"]}
    assert verdicts == {name: ["ok"] for name in NAMES}
    for t in report["tasks"]:
        assert t["oracle"]["passes"] == 1 and t["trivial"] is False and t["hackable"] is False


@pytest.fixture
def net_task(suite, tmp_path):
    """(its suite, the task) of img-env asking for the internet (allow_internet = true)."""
    folder = tmp_path / "tasks/img-net"
    shutil.copytree(TASKS / "img-env", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("allow_internet = false", "allow_internet = true"))
    net = parse_spec(f"terminal:path={folder.parent}")
    return net, net.tasks()[0]


def test_a_task_that_asks_for_the_internet_gets_the_operators_allowlist(net_task):
    from temper.envs.sandboxes import SandboxProvider
    from temper.sandbox import Sandbox, SandboxConfig
    from temper.sandbox.config import TaskMaxima

    net, task = net_task
    hosts = ["pypi.org", "files.pythonhosted.org"]
    images = {}
    for most, network, egress in ((TaskMaxima(internet_hosts=hosts), "egress", hosts),
                                  (TaskMaxima(), "egress", ["*"]), (TaskMaxima(internet=False), "loopback", ["*"])):
        env = net.make_env(task, SandboxProvider(SandboxConfig(task_max=most)))
        assert (env.image.network, env.image.egress_hosts) == (network, egress), most
        images[network, tuple(egress)] = env.image
    with Sandbox(SandboxConfig(image=images["egress", tuple(hosts)])) as sb:  # the proxy is its only way out
        r = sb.exec("echo $HTTPS_PROXY; python3 -c 'import urllib.request as u; u.urlopen(\"http://example.com\")'")
        assert r.stdout == b"http://127.0.0.1:3128\n" and b"403" in r.stderr, r


def test_the_recipes_task_max_reaches_the_episodes_of_train_eval_and_envqa(net_task, tmp_path):
    """`task_max` in a train, eval or envqa recipe is the operator's setting their episodes run under."""
    from temper.envqa.check_run import _pool
    from temper.envs.sandboxes import SandboxProvider
    from temper.evals import EvalConfig, OracleSolver
    from temper.orchestrator.backends import episode_sandbox
    from temper.orchestrator.config import TrainConfig

    net, task = net_task
    setting = {"task_max": {"internet_hosts": ["pypi.org"], "memory_mb": 512}}
    train = episode_sandbox(TrainConfig.from_recipe(setting), str(tmp_path / "run"))
    evaluation = EvalConfig.from_recipe(setting).sandbox_provider()
    envqa = _pool([], EnvQAConfig.from_recipe({**setting, "out": str(tmp_path / "qa")}), tmp_path / "qa")
    try:
        for pool in (SandboxProvider(train), evaluation, envqa, OracleSolver(evaluation).pool):
            env = net.make_env(task, pool)
            assert env.image.egress_hosts == ["pypi.org"] and env.folder.memory_mb == 512, pool
    finally:
        envqa.close()
