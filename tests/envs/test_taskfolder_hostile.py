"""Task folders come from strangers: the loader follows no link out of the folder, refuses a folder
above the operator's size, hashes in chunks, and clamps task.toml's resources and timeouts to the
operator's maxima (`SandboxConfig.task_max`), each refusal one line naming the folder and the path."""

import os
import tracemalloc

import pytest

from temper.envs.registry import parse_spec
from temper.envs.sandboxes import SandboxProvider
from temper.envs.taskfolder import TaskFolderError, load_task_folder
from temper.sandbox import SandboxConfig
from temper.sandbox.config import TaskMaxima


def _refused(folder, *words) -> str:
    with pytest.raises(TaskFolderError) as exc:
        load_task_folder(folder)
    msg = str(exc.value)
    assert str(folder) in msg and "\n" not in msg and all(w in msg for w in words), msg
    return msg


@pytest.fixture
def host_secret(tmp_path):
    d = tmp_path / "host"
    d.mkdir()
    (d / "secret.txt").write_text("HOST SECRET\n")
    return d


@pytest.mark.parametrize("entry", ["instruction.md", "task.toml", "environment", "tests", "solution"])
def test_a_named_entry_that_is_a_link_is_refused(task_folder, host_secret, entry) -> None:
    folder = task_folder()
    target = folder / entry
    if target.is_dir():
        (host_secret / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
        (host_secret / "solve.sh").write_text("true\n")
        os.rename(target, folder / f"{entry}.orig")
        target.symlink_to(host_secret)
    else:
        target.unlink()
        target.symlink_to(host_secret / "secret.txt")
    _refused(folder, entry, "link")


def test_links_inside_stay_inside_and_are_never_read(task_folder, host_secret) -> None:
    folder = task_folder(files={"data.txt": "x\n"})
    (folder / "environment" / "inside").symlink_to("data.txt")
    tf = load_task_folder(folder)  # a relative link within environment/ is kept for the workspace...
    assert "data.txt" in tf.files and "inside" not in tf.files  # ...but never read by the host
    (folder / "environment" / "out").symlink_to(host_secret / "secret.txt")
    _refused(folder, "environment/out", "outside the folder")
    (folder / "environment" / "out").unlink()
    (folder / "environment" / "up").symlink_to("../../host/secret.txt")
    _refused(folder, "environment/up", "outside the folder")
    (folder / "environment" / "up").unlink()
    (folder / "tests" / "helper.py").symlink_to("test.sh")
    _refused(folder, "tests/helper.py", "only environment/ may hold links")


def test_host_files_never_reach_the_prompt(task_folder, host_secret) -> None:
    folder = task_folder()
    (folder / "instruction.md").unlink()
    (folder / "instruction.md").symlink_to(host_secret / "secret.txt")
    with pytest.raises(TaskFolderError):
        parse_spec(f"terminal:path={folder}").tasks()


def test_a_folder_above_the_operators_size_is_refused_and_hashing_reads_in_chunks(task_folder) -> None:
    folder = task_folder()
    with open(folder / "tests" / "big.bin", "wb") as f:
        f.truncate(48 << 20)
    tracemalloc.start()
    load_task_folder(folder)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20, peak  # a 48 MiB file is hashed in 1 MiB chunks, never read whole
    with pytest.raises(TaskFolderError) as exc:
        load_task_folder(folder, TaskMaxima(folder_mb=16))
    assert str(folder) in str(exc.value) and "tests/big.bin" in str(exc.value) and "16 MiB" in str(exc.value)


def test_task_toml_is_clamped_to_the_operators_maxima_and_absurd_values_refused(task_folder) -> None:
    folder = task_folder(toml="[environment]\ncpus = 4096\nmemory_mb = 100000\nstorage_mb = 20000\n"
                              "[agent]\ntimeout_sec = 86400\n[verifier]\ntimeout_sec = 5000\n")
    tf = load_task_folder(folder)
    most = TaskMaxima()
    assert (tf.cpus, tf.memory_mb, tf.storage_mb) == (most.cpus, most.memory_mb, most.storage_mb)
    assert (tf.agent_timeout_s, tf.verifier_timeout_s) == (most.agent_timeout_s, most.verifier_timeout_s)
    # the operator's own maxima, from the sandbox configuration the suite's sandboxes come from
    provider = SandboxProvider(SandboxConfig(task_max=TaskMaxima(cpus=2, memory_mb=512)))
    suite = parse_spec(f"terminal:path={folder}")
    env = suite.make_env(suite.tasks()[0], provider)
    assert env.sandbox_limits.cpus == 2 and env.sandbox_limits.memory_mb == 512
    for toml, key in [("[environment]\nmemory_mb = 1e8\nstorage_mb = 1e8\n", "memory_mb"),
                      ("[agent]\ntimeout_sec = 1e9\n", "agent.timeout_sec"), ("[environment]\ncpus = inf\n", "cpus"),
                      ("[verifier]\ntimeout_sec = nan\n", "verifier.timeout_sec")]:
        (folder / "task.toml").write_text(toml)
        _refused(folder, "task.toml", key)
