"""`terminal` (the shipped tasks) and `terminal:path=DIR` (every task folder under DIR).

The agent works in /app with the shell and file tools; when it submits, tests/ is uploaded to
/tests and tests/test.sh runs in the same workspace, writing /logs/verifier/reward.txt (a number)
or reward.json (components; its `reward` key, else their mean, is the value). A task folder with an
environment/Dockerfile runs in its image (`images=on`, the default; built once by temper.images): the
agent as the image's USER in its WORKDIR, the oracle and the verifier as root in the same live container.
"""

import asyncio
import errno
import json
import logging
from pathlib import Path
from typing import Any

from temper.envs import verify_record
from temper.envs.env import GRACE_S, StepResult, TaskLimits, timed_verify
from temper.envs.registry import register_suite
from temper.envs.reward import Reward
from temper.envs.sandbox_env import SandboxEnv
from temper.envs.sandboxes import as_provider, broken_by_agent, is_sandbox_crash, verifier_broken
from temper.envs.suite import ListSuite
from temper.envs.task import Task, content_hash
from temper.envs.taskfolder import TaskFolder, find_task_folders, load_task_folder
from temper.errors import TemperError
from temper.images import Image, ImagesConfig, ImageStore
from temper.sandbox import ExecResult, ImageRoot, Limits, SandboxError
from temper.sandbox.aio import call
from temper.sandbox.config import TaskMaxima
from temper.trajectory import FailureKind

log = logging.getLogger(__name__)

REWARD_BYTES = 1 << 20
VERIFIER_ROOM = "/logs/.verifier"  # the verifier's own HOME and TMPDIR, made empty before each run
# The environment of tests/test.sh on top of the sandbox's: nothing the agent left in its HOME, TMPDIR,
# working folder or the user site of a Python reaches the verifier (tests/envs/test_reward_channel.py).
VERIFIER_ENV = {
    "HOME": f"{VERIFIER_ROOM}/home", "TMPDIR": f"{VERIFIER_ROOM}/tmp", "XDG_CONFIG_HOME": f"{VERIFIER_ROOM}/home/.c",
    "PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": "",
    "PYTHONSTARTUP": "", "PYTHONUSERBASE": f"{VERIFIER_ROOM}/home/.local",
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "BASH_ENV": "", "ENV": "", "INPUTRC": "/dev/null",
    # a repository's own .git/config is the agent's: these override it (command-line configuration wins)
    "GIT_CONFIG_COUNT": "3", "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath", "GIT_CONFIG_VALUE_1": "/dev/null",
    "GIT_CONFIG_KEY_2": "core.pager", "GIT_CONFIG_VALUE_2": "cat",
    "PIP_CONFIG_FILE": "/dev/null", "NPM_CONFIG_USERCONFIG": "/dev/null",
    "PYTEST_ADDOPTS": "", "PYTEST_PLUGINS": "", "LD_PRELOAD": "", "LD_LIBRARY_PATH": "",
}
_CONTROL_LOCKS: dict[str, asyncio.Lock] = {}  # one control run at a time per task (folder digest)
SHIPPED = Path(__file__).resolve().parent.parent / "tasks" / "terminal"
CONTAINER_PIDS = 2048  # an image task's processes and threads: podman's default pids_limit
BACKGROUND = ("You are working in a Linux sandbox without network access. The task's files are in /app, "
              "the working directory. Use the tools to inspect and change files and to run commands; "
              "when the task is done, call submit.")
IMAGE_BACKGROUND = ("You are working as root in a Linux container built for this task; its network is its own "
                    "loopback. The working directory is {workdir}. Use the tools to inspect and change files and "
                    "to run commands (processes you start keep running); when the task is done, call submit.")


class TerminalEnv(SandboxEnv):
    tools = ("bash", "python", "read_file", "write_file", "list_files", "submit")
    background = BACKGROUND

    def __init__(self, task: Task, folder: TaskFolder, pool: Any = None, image: ImageRoot | None = None):
        if image is not None:  # a container's session too: one shell whose jobs and state persist
            self.tools = ("bash", "shell", "python", "read_file", "write_file", "list_files", "submit")
        if image is None:
            sb_limits = Limits(cpus=folder.cpus, memory_mb=folder.memory_mb, disk_mb=folder.storage_mb,
                               wall_time_s=folder.agent_timeout_s)
        else:  # as a container: the writable layer is on disk, memory is bounded by its cgroup, not RLIMIT_AS,
            # processes and threads by podman's default pids limit (a browser alone runs ~100 threads)
            sb_limits = Limits(cpus=folder.cpus, memory_mb=folder.memory_mb, disk_mb=folder.storage_mb,
                               file_size_mb=folder.storage_mb, address_space_mb=0, wall_time_s=folder.agent_timeout_s,
                               processes=CONTAINER_PIDS)
            self.background = IMAGE_BACKGROUND.format(workdir=image.workdir)
        limits = TaskLimits(agent_timeout_s=folder.agent_timeout_s, verifier_timeout_s=folder.verifier_timeout_s)
        super().__init__(task, pool, limits, None if image else folder.workspace(), sb_limits, image=image)
        self.folder = folder
        self.workdir = image.workdir if image else "/app"  # where setup.sh, solve.sh and test.sh run
        self.admin = "root" if image else None  # an image's verifier and oracle run as its root, as in Harbor
        self.clean = False  # True on a run without an agent (oracle, control): its timeout is judged as it is

    async def setup(self) -> None:
        if self.folder.setup_script:
            r = await self.exec(["bash", "-s"], stdin=self.folder.setup_script, timeout=120, cwd=self.workdir,
                                user=self.admin)
            if not r.ok:
                raise TemperError(f"task folder {self.folder.path}: environment/setup.sh failed "
                                  f"(exit {r.exit_code}): {r.stderr.decode(errors='replace')[-300:]}")

    async def step(self, action: str) -> StepResult:
        reward = await timed_verify(self.verify(), self.limits.verifier_timeout_s + GRACE_S, self.reward_range)
        if reward.info.get("verifier_timed_out") and not self.clean:
            reward = await self.judge_timeout(reward)
        return StepResult(reward=reward, done=True)

    async def judge_timeout(self, reward: Reward) -> Reward:
        """test.sh ran past its timeout after the agent phase: the agent's 0 only if a clean run of this task
        (recorded, else a control run now, one at a time per task) verifies well inside that time; a clean
        run that times out too is the task's fault (quarantined at once), one that comes close is the host's."""
        limit, digest = self.limits.verifier_timeout_s, self.folder.digest
        async with _CONTROL_LOCKS.setdefault(digest, asyncio.Lock()):
            clean = verify_record.recorded(digest, limit) or await self.control_run()
        if clean is None:
            return Reward.infra(FailureKind.HARNESS_TIMEOUT, f"tests/test.sh ran past {limit:g}s and the control "
                                                             f"run of the task could not run")
        reward.info.update(clean_verify_s=clean.seconds, clean_verify_source=clean.source)
        if clean.fits:
            return reward
        reward.info.pop("verifier_broken_by_agent", None)
        if clean.seconds is None:
            why = (f"tests/test.sh ran past {limit:g}s after the agent and on a clean {clean.source} run too: the "
                   f"task's verifier does not finish within its timeout")
            return Reward(value=0.0, failure=FailureKind.TASK_BROKEN, info={**reward.info, "error": why})
        why = (f"tests/test.sh ran past {limit:g}s; a clean {clean.source} run takes {clean.seconds:g}s of it, "
               f"too close to blame the agent")
        return Reward(value=0.0, failure=FailureKind.HARNESS_TIMEOUT, info={**reward.info, "error": why})

    async def control_run(self) -> verify_record.CleanVerify | None:
        """The task once more on a fresh sandbox, its reference solution (if any) in place of the agent, and the
        verifier timed (recorded for the next episodes); None if the control's own sandbox failed."""
        control = TerminalEnv(self.task, self.folder, self.provider.unpooled(), self.image)
        try:
            async with control:
                await control.reset()
                if self.folder.oracle:
                    await control.run_solution()
                await control.clean_verify("control")
        except SandboxError as exc:  # a crash (SandboxCrashed) included: the control tells nothing then
            log.warning("task %s: the control run failed: %s", self.task.id, exc)
            return None
        return verify_record.recorded(self.folder.digest, self.limits.verifier_timeout_s)

    async def clean_verify(self, source: str) -> Reward:
        """The verifier on a workspace without an agent's work (the reference solution's, or untouched); the
        time it took, or that it ran past its timeout, is recorded for `judge_timeout`."""
        self.clean = True
        reward = (await self.step("")).reward or Reward()
        info = reward.info
        if info.get("verifier_timed_out"):
            verify_record.record(self.folder.digest, verify_record.CleanVerify(None, self.limits.verifier_timeout_s,
                                                                               source))
        elif reward.failure is None and "verify_s" in info and info.get("test_exit_code", -1) >= 0:
            verify_record.record(self.folder.digest, verify_record.CleanVerify(info["verify_s"],
                                                                               self.limits.verifier_timeout_s, source))
        return reward

    async def verify(self) -> Reward:
        # The verifier's contract (docs/envs.md): a clean room. /tests and /logs (a filesystem of its own) are
        # emptied of what the agent left there (e.g. a json.py that the tests would import before the real
        # one), the tests are uploaded and /tests remounted read-only, test.sh runs from the host's copy (appending to
        # /tests/test.sh while bash reads it changes nothing) with a fresh, empty HOME and TMPDIR and no
        # per-user configuration (VERIFIER_ENV). The agent may also have planted links, fifos or unwritable
        # folders there: what it did to its own sandbox that keeps the verifier from running is its failure
        # (a 0), never an infrastructure one.
        prep = await self.exec(f"chmod -R u+rwX /logs 2>/dev/null; find /logs -mindepth 1 -delete && "
                               f"mkdir -p /logs/verifier {VERIFIER_ENV['HOME']} {VERIFIER_ENV['TMPDIR']}",
                               user=self.admin)
        if prep.exit_code != 0:
            why = prep.stderr.decode(errors="replace")[-300:]
            return broken_by_agent(f"cannot clear /logs/verifier: {why}")
        try:  # /tests is emptied by the sandbox's supervisor, then sealed read-only for every command
            await call(self.sandbox.upload, self.tests_folder(), "/tests", read_only=True)
        except SandboxError as exc:
            if is_sandbox_crash(exc) or not exc.errno:  # no errno: the host's side failed (e.g. staging)
                raise
            return broken_by_agent(f"cannot upload the tests: {exc}")
        r = await self.exec(["bash", "-c", self.folder.test_script, "/tests/test.sh"], env=VERIFIER_ENV,
                            timeout=self.limits.verifier_timeout_s, cwd=self.workdir, user=self.admin)
        info = {"test_exit_code": r.exit_code, "test_output": (r.stdout + r.stderr).decode(errors="replace")[-2000:],
                "verify_s": round(r.duration_s, 3)}
        # A reward is trusted only from a test.sh that finished by itself: one the agent's code (run by the
        # tests) killed, hung past its time or kept from writing a parseable reward is the agent's 0 (a timeout
        # only once a clean run shows the task verifies well inside it: `judge_timeout`).
        if r.limit == "wall_time":
            info["verifier_timed_out"] = True
            return verifier_broken(f"tests/test.sh ran past {self.limits.verifier_timeout_s:g}s", info)
        if r.exit_code < 0:
            return verifier_broken(f"tests/test.sh was killed by signal {-r.exit_code}", info)
        for name in ("reward.txt", "reward.json"):
            try:  # the host's read opens only a regular file: a fifo or link there fails at once
                raw = await call(self.sandbox.read_file, f"/logs/verifier/{name}", REWARD_BYTES)
            except SandboxError as exc:
                if is_sandbox_crash(exc):
                    raise
                if exc.errno == errno.ENOENT:
                    continue
                # /logs/verifier was made empty just before test.sh: only the code it ran (the agent's
                # work) can have left a fifo, socket, link or folder there: the agent's failure, a 0
                return broken_by_agent(f"/logs/verifier/{name} is not a readable file: {exc}", info)
            text = raw.decode(errors="replace").strip()
            try:
                reward = Reward(value=float(text)) if name == "reward.txt" else Reward.coerce(json.loads(text))
            except (ValueError, TypeError):  # RewardValueError (NaN, infinities) is a ValueError
                return verifier_broken(f"bad {name}: {text[:100]!r}", info)
            reward.info.update(info)
            return reward
        return verifier_broken("tests/test.sh wrote no /logs/verifier/reward.txt or reward.json", info)

    def tests_folder(self) -> Path:
        """What is uploaded to /tests for the verifier: the task's tests/."""
        return self.folder.path / "tests"

    async def run_solution(self) -> ExecResult:
        """solution/solve.sh in the workspace, as the agent would have worked there."""
        await call(self.sandbox.upload, self.folder.path / "solution", "/solution")
        return await self.exec(["bash", "/solution/solve.sh"], timeout=self.folder.agent_timeout_s, cwd=self.workdir,
                               user=self.admin)

    async def run_oracle(self) -> Reward:
        r = await self.run_solution()
        reward = await self.clean_verify("oracle")
        reward.info["oracle_exit_code"] = r.exit_code
        return reward


class TerminalSuite(ListSuite):
    name = "terminal"
    domain = "terminal"
    needs_sandbox = True
    env_class: type[TerminalEnv] = TerminalEnv

    def __init__(self, path: str = "", images: str = "on") -> None:
        super().__init__()
        if images not in ("on", "off"):
            raise TemperError(f"terminal: images={images!r}: on (a task's environment/Dockerfile gives its root "
                              f"filesystem) or off (it is ignored; the task runs on the host's)")
        self.root = Path(path) if path else SHIPPED
        self.use_images = images == "on"
        self.folders: dict[str, TaskFolder] = {}
        self.images: dict[str, ImageRoot] = {}

    def build(self) -> list[Task]:
        tasks = []
        for folder in find_task_folders(self.root):
            tf = load_task_folder(folder)
            tags = tuple(dict.fromkeys([*tf.tags, *([tf.category] if tf.category else [])]))
            payload: dict[str, Any] = {"path": str(folder), "name": folder.name, "files": tf.files}
            if tf.has_dockerfile and self.use_images:
                image = self.image_of(folder)
                payload["image"] = image.key
            elif tf.has_dockerfile:
                payload["dockerfile_ignored"] = True
                log.warning("task folder %s: environment/Dockerfile is not executed (images=off); the task runs "
                            "on the host's filesystem with environment/'s files in /app", folder.name)
            task = Task(
                id=content_hash(tf.digest), suite=self.name, domain=self.domain, prompt=tf.instruction, tags=tags,
                difficulty=tf.difficulty, oracle=tf.oracle, payload=payload,
            )
            self.folders[task.payload["path"]] = tf
            tasks.append(task)
        return tasks

    def image_of(self, folder: Path) -> Image:
        """The task's image, built once (kept by content in the image store; docs/images.md)."""
        store = ImageStore(ImagesConfig())
        image = store.build_task(folder)
        self.images[str(folder)] = ImageRoot(layers=store.layer_dirs(image), env=image.env, workdir=image.workdir,
                                             user=image.user, uid_base=store.cfg.uid_base)
        return image

    def make_env(self, task: Task, pool: Any = None) -> TerminalEnv:
        self.tasks()
        provider = as_provider(pool)
        # the operator's maxima for task.toml's requests: the sandbox configuration's `task_max`
        most = getattr(getattr(provider.pool, "config", None), "task_max", None) or provider.config.task_max
        tf = self.folders.get(task.payload["path"])
        if tf is None or most != TaskMaxima():
            tf = load_task_folder(task.payload["path"], most)
        image = self.images.get(task.payload["path"])
        if image is not None and tf.allow_internet:  # egress through the host's network, never its loopback
            image = image.model_copy(update={"network": "egress", "egress_hosts": most.internet_hosts})
        return self.env_class(task, tf, provider, image)


register_suite("terminal")(TerminalSuite)
