"""The Python API in both modes: exec, files, mounts, reset, errors."""

import asyncio
import concurrent.futures
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import MODES, make_config

from temper.errors import ConfigError, TemperError
from temper.sandbox import AsyncSandbox, Mount, Sandbox, SandboxConfig, SandboxError
from temper.sandbox.config import Limits


@pytest.mark.timeout(60)
def test_exec_forms_stdin_env_cwd(sbx: Sandbox) -> None:
    r = sbx.exec("echo $GREETING from $(pwd); exit 3", env={"GREETING": "hi"})
    assert (r.exit_code, r.stdout, r.limit) == (3, f"hi from {sbx.workdir}\n".encode(), None)
    r = sbx.exec(["python3", "-c", "import sys; print(sys.stdin.read().upper())"], stdin="shout")
    assert r.ok and r.text == "SHOUT\n"
    r = sbx.exec(["wc", "-c"], stdin=b"\x00\xff" * 100_000)  # binary stdin larger than a pipe buffer
    assert r.stdout == b"200000\n"
    r = sbx.exec("pwd", cwd="pkg")
    assert r.text == f"{sbx.workdir}/pkg\n"
    r = sbx.exec(["no-such-command"])
    assert r.exit_code == 127 and b"no-such-command" in r.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [*MODES, "image"])
def test_an_exec_reports_the_peak_memory_of_its_processes(mode: str, state_dir: Path, template: Path,
                                                          image_layers: list[Path], tmp_path: Path) -> None:
    limits = Limits(memory_mb=512, wall_time_s=30)
    with Sandbox(make_config(mode, state_dir, template, tmp_path, limits=limits, image_layers=image_layers)) as sb:
        small = sb.exec("true")
        big = sb.exec(["bash", "-c", "python3 -c 'x = bytearray(120 << 20); x[::4096] = b\"1\" * len(x[::4096])'"])
        assert big.exit_code == 0 and big.peak_rss_kb > 120 << 10 > small.peak_rss_kb > 0, (big, small)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", [*MODES, "image"])
def test_commands_start_with_no_signal_ignored_whatever_the_host_ignores(mode: str, state_dir: Path, template: Path,
                                                                         image_layers: list[Path],
                                                                         tmp_path: Path) -> None:
    """A host run in the background ignores SIGINT and SIGQUIT, one under nohup SIGHUP: ignored signals pass
    through exec, and once they reached the shell's `sleep`, Ctrl-C could not stop it (a CI rehearsal)."""
    held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)}
    try:
        with Sandbox(make_config(mode, state_dir, template, tmp_path, image_layers=image_layers)) as sb:
            if mode == "landlock":  # Landlock hides /proc/self/status; and it has no interactive shell
                ask = "import signal as s; print([n for n in (1, 2, 3) if s.getsignal(n) == s.SIG_IGN])"
                assert sb.exec(["python3", "-c", ask]).stdout == b"[]\n"
                return
            assert not standard_signals_ignored(sb, "self")
            sb.shell("sleep 100\n", wait_s=0.3)
            sleeping = "for p in /proc/[0-9]*; do read -r c < $p/comm && [ $c = sleep ] && echo $p; done"
            deadline = time.monotonic() + 10
            while not sb.exec(sleeping).stdout and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not standard_signals_ignored(sb, sb.exec(sleeping).text.strip())  # what bash passes to its jobs
            sb.shell("\x03", wait_s=1)
            deadline = time.monotonic() + 10
            while sb.exec(sleeping).stdout and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not sb.exec(sleeping).stdout  # one Ctrl-C stopped it
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


@pytest.mark.timeout(60)
def test_an_exec_kills_what_it_left_but_spares_the_interactive_shell_and_its_jobs(state_dir: Path, template: Path,
                                                                                  tmp_path: Path) -> None:
    """bwrap mode: what an exec starts dies with it, but the shell's session is not the exec's (a kill(-1)
    sweep once took the shell along, so that an agent mixing exec and shell lost its shell at every exec)."""
    with Sandbox(make_config("bwrap", state_dir, template, tmp_path)) as sb:
        assert sb.shell("cd /tmp; X=7; sleep 300 &\n").started
        assert sb.exec("setsid sleep 200 & sleep 201 & echo started").stdout == b"started\n"
        r = sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").text
        assert "sleep 300" in r and "sleep 200" not in r and "sleep 201" not in r
        again = sb.shell("echo $X $(pwd)\n")
        text = again.text + sb.shell("", wait_s=1).text
        assert not again.started and "7 /tmp" in text  # the same shell, its state kept
        sb.reset()
        assert "sleep 300" not in sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").text  # a reset takes it all


def standard_signals_ignored(sb: Sandbox, proc: str) -> int:
    """The signals 1-31 process `proc` ignores, as a mask (glibc's posix_spawn ignores its own internal 32
    and 33 in every child it starts, as it must)."""
    line = sb.exec(f"grep SigIgn /proc/{proc.removeprefix('/proc/')}/status")
    assert line.stdout.startswith(b"SigIgn:"), line
    return int(line.stdout.split()[1], 16) & 0x7FFF_FFFF


@pytest.mark.timeout(60)
def test_python_and_pytest_are_available(sbx: Sandbox) -> None:
    r = sbx.exec("python3 -m pytest -q pkg", timeout=30)
    assert r.exit_code == 0 and b"1 passed" in r.stdout, r.stdout + r.stderr


@pytest.mark.timeout(60)
def test_files_and_reset_restore_the_template(sbx: Sandbox, template: Path) -> None:
    before = (template / "hello.txt").read_text()
    sbx.write_file("hello.txt", "changed")
    sbx.write_file("deep/er/new.bin", b"\x00\x01", mode=0o600)
    assert sbx.read_file("hello.txt") == b"changed"
    assert sbx.exec("cat deep/er/new.bin | wc -c; stat -c %a deep/er/new.bin").text == "2\n600\n"
    names = {e.path: e.type for e in sbx.list_files(recursive=True)}
    assert names["deep/er/new.bin"] == "file" and names["pkg"] == "dir"
    sbx.exec("rm -rf pkg; echo tmp > $TMPDIR/t; echo log > " + sbx.path("/logs/x"))
    if sbx.mode == "bwrap":
        sbx.exec("echo shm > /dev/shm/s")
    assert sbx.read_file("/logs/x") == b"log\n"
    took = sbx.reset()
    assert took < 0.5
    assert sbx.read_file("hello.txt").decode() == before == (template / "hello.txt").read_text()
    assert sbx.exec("ls; ls $TMPDIR; ls " + sbx.path("/logs")).text == "hello.txt\npkg\n"
    if sbx.mode == "bwrap":
        assert sbx.exec("ls /dev/shm").text == ""
    assert sorted(p.name for p in template.iterdir()) == ["hello.txt", "pkg"]  # the template untouched
    with pytest.raises(SandboxError, match=r"missing\.txt"):
        sbx.read_file("missing.txt")


@pytest.mark.timeout(60)
def test_reset_to_another_template_and_upload(sbx: Sandbox, public_tmp: Path, template: Path) -> None:
    other = public_tmp / f"other-{sbx.mode}"
    (other / "tests").mkdir(parents=True)
    (other / "task.md").write_text("other task")
    (other / "tests" / "test_x.py").write_text("def test_x():\n    pass\n")
    sbx.reset(template=other)
    assert sbx.exec("cat task.md").text == "other task"
    sbx.upload(other / "tests", "/logs/tests")  # e.g. a verifier's tests, added late
    assert sbx.exec(f"cd {sbx.path('/logs')} && python3 -m pytest -q tests", timeout=60).exit_code == 0
    sbx.reset(template=template)
    assert sbx.exec("ls").text == "hello.txt\npkg\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_workspace_mount_and_verifier_folders(mode: str, state_dir: Path, template: Path, tmp_path: Path,
                                              public_tmp: Path) -> None:
    tests_dir = public_tmp / f"tests-{mode}"  # readable by sandbox uids (Landlock mode reads it in place)
    tests_dir.mkdir()
    (tests_dir / "check.sh").write_text("echo 1 > $REWARD\n")
    cfg = make_config(mode, state_dir, template, tmp_path / "run", workspace_mount="/work",
                      mounts=[Mount(dest="/logs/verifier", writable=True), Mount(dest="/tests", src=tests_dir)])
    with Sandbox(cfg) as sb:
        if mode == "bwrap":
            assert sb.workdir == "/work"
        reward = sb.path("/logs/verifier/reward.txt")
        r = sb.exec(f"bash {sb.path('/tests/check.sh')}", env={"REWARD": reward})
        assert r.exit_code == 0, r
        assert sb.read_file("/logs/verifier/reward.txt") == b"1\n"
        assert sb.exec(f"touch {sb.path('/tests/x')}").exit_code != 0  # read-only
        with pytest.raises(SandboxError):
            sb.write_file("/tests/x", "no")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_read_only_upload_is_emptied_first_and_stays_read_only_until_reset(mode: str, state_dir: Path,
                                                                             template: Path, tmp_path: Path,
                                                                             public_tmp: Path) -> None:
    tests_dir = public_tmp / f"ro-tests-{mode}"
    (tests_dir / "sub").mkdir(parents=True)
    (tests_dir / "sub" / "test_x.py").write_text("ok\n")
    cfg = make_config(mode, state_dir, template, tmp_path / "run", mounts=[Mount(dest="/tests", writable=True)])
    with Sandbox(cfg) as sb:
        t = sb.path("/tests")
        # what the sandbox planted there, however locked down, goes first
        assert sb.exec(f"mkdir -p {t}/planted && touch {t}/planted/conftest.py && chmod 000 {t}/planted").ok
        sb.upload(tests_dir, "/tests", read_only=True)
        assert sb.exec(f"find {t} -type f").text.split() == [f"{t}/sub/test_x.py"]
        for attack in (f"touch {t}/x", f"echo evil >> {t}/sub/test_x.py", f"rm {t}/sub/test_x.py",
                       f"mv {t}/sub {t}/moved"):
            assert not sb.exec(attack).ok, attack
        if mode == "bwrap":  # a remount, which no command can undo; Landlock mode has mode bits only
            assert not sb.exec(f"chmod -R u+w {t} && touch {t}/x").ok
            assert "ro" in sb.exec(f"grep ' {t} ' /proc/self/mountinfo").text.split()[5].split(",")
        with pytest.raises(SandboxError):
            sb.write_file("/tests/x", "no")
        sb.upload(tests_dir, "/tests", read_only=True)  # again: replaced, still read-only
        assert sb.exec(f"cat {t}/sub/test_x.py").text == "ok\n" and not sb.exec(f"touch {t}/x").ok
        sb.reset()
        assert sb.exec(f"touch {t}/x && ls {t}").text == "x\n"  # a reset gives the folder back, empty


@pytest.mark.timeout(60)
def test_interrupt_kills_the_running_command_and_only_that_one(sbx: Sandbox) -> None:
    assert sbx.interrupt() is False  # nothing runs
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(sbx.exec, "echo started; sleep 30", timeout=30)
        while sbx._sup.running is None:
            time.sleep(0.01)
        time.sleep(0.2)
        t = time.monotonic()
        assert sbx.interrupt() is True
        r = running.result(timeout=10)
    assert r.limit == "interrupted" and not r.ok and r.stdout == b"started\n" and time.monotonic() - t < 10
    os.write(sbx._sup._cancel_w, (12345).to_bytes(4, "little"))  # a stale interrupt, for a command long gone
    assert sbx.exec("echo next").text == "next\n"  # runs to its end


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_async_api(mode: str, state_dir: Path, template: Path, tmp_path: Path) -> None:
    cfg = make_config(mode, state_dir, template, tmp_path / "run")

    async def main() -> list[bytes]:
        boxes = await asyncio.gather(*(AsyncSandbox.create(cfg) for _ in range(3)))
        try:
            outs = await asyncio.gather(*(b.exec(f"sleep 0.3; echo {i}") for i, b in enumerate(boxes)))
            await boxes[0].write_file("a.txt", "A")
            assert await boxes[0].read_file("a.txt") == b"A"
            await boxes[0].reset()
            return [o.stdout for o in outs]
        finally:
            await asyncio.gather(*(b.close() for b in boxes))

    assert asyncio.run(main()) == [b"0\n", b"1\n", b"2\n"]


def test_bad_input_is_one_clear_error(state_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="nowhere: template folder not found"):
        Sandbox(make_config("bwrap", state_dir, tmp_path / "nowhere", tmp_path))
    with pytest.raises(ValueError):
        Limits(wall_time_s=0)
    with pytest.raises(ValueError, match="reserved"):
        Mount(dest="/proc", writable=True)
    from temper.config import load_config

    with pytest.raises(ConfigError, match=r"limits\.memory_mb"):
        load_config(SandboxConfig, None, ["limits.memory_mb=1"])
    assert issubclass(SandboxError, TemperError)


@pytest.mark.timeout(60)
def test_isolation_none_runs_with_a_warning(state_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from temper.sandbox import modes

    modes._warned = False
    with Sandbox(make_config("none", state_dir, None, tmp_path)) as sb:
        assert sb.exec("echo plain").text == "plain\n"
    assert "isolation: none" in caplog.text and "host's files, network and processes" in caplog.text


@pytest.mark.timeout(60)
def test_a_sandbox_outlives_the_thread_that_started_it(state_dir: Path, template: Path, tmp_path: Path) -> None:
    """bwrap --die-with-parent fires when the starting *thread* ends; sandboxes must not care."""
    import threading

    box: list[Sandbox] = []
    t = threading.Thread(target=lambda: box.append(Sandbox(make_config("bwrap", state_dir, template, tmp_path))))
    t.start()
    t.join()
    with box[0] as sb:
        assert sb.exec("echo alive").text == "alive\n"


def test_kill_all_sweeps_are_refused_as_root() -> None:
    """kill(-1) as root outside a sandbox would kill every process of the machine: never."""
    import subprocess
    import sys

    from temper.sandbox.layout import INSIDE_DIR

    code = (f"import sys; sys.path.insert(0, {str(INSIDE_DIR)!r}); import proc; "
            "print(proc.kill_all_is_safe('ns', 1), proc.kill_all_is_safe('uid', 1), proc.kill_all_is_safe('tree', 1))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout == "False False False\n", r.stderr


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_dead_sandbox_is_reported_and_reset_restarts_it(mode: str, state_dir: Path, template: Path,
                                                          tmp_path: Path) -> None:
    import os
    import signal

    from temper.sandbox import SandboxCrashed

    with Sandbox(make_config(mode, state_dir, template, tmp_path)) as sb:
        assert sb._sup is not None and sb._sup._proc is not None
        os.kill(sb._sup._proc.pid, signal.SIGKILL)  # an infrastructure failure, from outside
        # kill() only queues the signal: until the process is gone, a call can still be answered (CI saw
        # `exec("true")` succeed under load), so the sandbox is dead only once its process is reaped
        sb._sup._proc.wait(timeout=10)
        with pytest.raises(SandboxCrashed):
            sb.exec("true")
        sb.reset()
        assert sb.exec("cat hello.txt").text == "hello from the template\n"
