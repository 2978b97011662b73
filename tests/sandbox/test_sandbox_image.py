"""Image sandboxes: a root filesystem of read-only layers under a writable layer on disk, root in a user
namespace of 65,536 ids (uid_base outside), the image's ENV/WORKDIR/USER, processes kept across commands
until reset, a loopback-only network of its own. The image here is made of the host's own bash and coreutils
(fast, offline); tests/images/test_image_sandbox.py runs a Debian image built by podman."""

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import IMAGE_UID_BASE

from temper.sandbox import ImageRoot, Sandbox, SandboxConfig, SandboxError
from temper.sandbox.result import ShellOutput

# Docker's and Podman's default capabilities for root: chown dac_override fowner fsetid kill setgid setuid setpcap
# net_bind_service net_raw sys_chroot mknod audit_write setfcap
CONTAINER_CAPS = (0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31)
@pytest.fixture
def image_cfg(image_layers: list[Path], state_dir: Path, tmp_path: Path) -> SandboxConfig:
    image = ImageRoot(layers=image_layers, env={"GREETING": "hi", "PATH": "/usr/bin:/bin"}, workdir="/app",
                      uid_base=IMAGE_UID_BASE)
    return SandboxConfig(image=image, state_dir=state_dir, run_dir=tmp_path)


def test_root_with_the_images_env_workdir_and_users(image_cfg):
    with Sandbox(image_cfg) as sb:
        assert sb.mode == "image"
        r = sb.exec("id -u; pwd; echo $GREETING $HOME; cat /app/README; cat /etc/group")
        lines = r.stdout.decode().splitlines()
        assert lines[:4] == ["0", "/app", "hi /root", "from the app layer"]  # ENV, WORKDIR, HOME from passwd
        assert "No such file" in r.stderr.decode()  # the upper layer's whiteout hides the lower /etc/group
        assert sb.exec("id -u; echo $HOME", user="agent").stdout == b"1000\n/home/agent\n"
        bad = sb.exec("true", user="nobody-here")
        assert bad.exit_code != 0 and b"not in the image's /etc/passwd" in bad.stderr


def test_the_root_filesystem_is_writable_on_disk_and_reset_restores_the_image(image_cfg):
    with Sandbox(image_cfg) as sb:
        upper = sb._live()._upper
        assert sb.exec("touch /usr/bin/added && chown 1000 /usr/bin/added && rm /app/README").exit_code == 0
        st = os.stat(upper / "upper/usr/bin/added")  # on the host's disk, owned by the shifted uid
        assert (st.st_uid, Path(upper).stat().st_uid) == (IMAGE_UID_BASE + 1000, IMAGE_UID_BASE)
        assert sb.exec("cat /app/README").exit_code != 0
        sb.exec("sleep 300 &")
        ms = sb.reset() * 1e3
        r = sb.exec("ls /usr/bin/added; cat /app/README; ls /proc")
        assert b"from the app layer" in r.stdout and b"No such file" in r.stderr
        assert len([p for p in r.stdout.decode().split() if p.isdigit()]) <= 6  # sleep is gone
        assert ms < 1000
    assert not upper.exists()  # the writable layer goes with the sandbox


def test_background_processes_outlive_their_command_until_reset(image_cfg):
    with Sandbox(image_cfg) as sb:
        t0 = time.monotonic()
        r = sb.exec("(while :; do echo x >> /tmp/tick; sleep 0.05; done) & echo started")  # holds stdout open
        assert r.stdout == b"started\n" and time.monotonic() - t0 < 5
        time.sleep(0.6)
        count = "n=0; while read -r l; do n=$((n+1)); done < /tmp/tick; echo $n"
        first = int(sb.exec(count).stdout)
        time.sleep(0.4)
        assert int(sb.exec(count).stdout) > first > 3  # still writing, across commands
        sb.reset()
        assert sb.exec("cat /tmp/tick").exit_code != 0


def test_a_sandbox_cannot_reach_the_hosts_loopback_but_has_its_own(image_cfg):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    hits: list[bytes] = []
    threading.Thread(target=lambda: hits.append(server.accept()[0].recv(10)), daemon=True).start()
    try:
        with Sandbox(image_cfg) as sb:
            r = sb.exec(f"echo hi > /dev/tcp/127.0.0.1/{port} && echo reached")
            assert r.exit_code != 0 and b"reached" not in r.stdout and hits == []
            assert b"Connection refused" in r.stderr  # its own loopback, with nothing listening on it
    finally:
        server.close()


def test_two_sandboxes_of_one_image_see_nothing_of_each_other(image_cfg):
    with Sandbox(image_cfg) as a, Sandbox(image_cfg) as b:
        a.exec("echo secret > /root/note; sleep 300 &")
        assert b.exec("cat /root/note").exit_code != 0
        assert "sleep" not in b.exec("cat /proc/*/comm").stdout.decode()
        assert "sleep" in a.exec("cat /proc/*/comm").stdout.decode()


def test_root_inside_has_a_runtimes_default_capabilities_and_no_way_out(image_cfg, tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text("echo verifying\n")
    tests.chmod(0o755)
    with Sandbox(image_cfg) as sb:
        status = sb.exec("cat /proc/self/status").stdout.decode()
        bnd = int(next(line for line in status.splitlines() if line.startswith("CapBnd")).split()[1], 16)
        assert bnd == sum(1 << c for c in CONTAINER_CAPS)
        assert sb.exec("ls /.temper").exit_code != 0  # the supervisor's view is not there...
        for peek in ("ls /proc/1/root/", "cat /proc/1/environ", "ls /proc/$PPID/root/"):  # ...nor through /proc
            assert b"Permission denied" in sb.exec(peek).stderr, peek
        assert sb.exec("kill -9 1; sleep 0.1; echo alive").stdout == b"alive\n"
        assert sb.exec("true").exit_code == 0  # pid 1, the supervisor, ignored it
        sb.exec("kill -9 $PPID")  # the spawner that started it: the next command starts from a new one...
        r = sb.exec("ls /; ls /.temper")
        assert b"app" in r.stdout and r.exit_code != 0  # ...in the image, never from the supervisor's view
        sb.upload(tests, "/tests", read_only=True)
        r = sb.exec("cat /tests/test.sh; echo tampered >> /tests/test.sh")
        assert r.stdout == b"echo verifying\n" and b"Read-only file system" in r.stderr
        assert sb.exec("ln -s /proc/1/root/etc /app/escape").exit_code == 0
        with pytest.raises(SandboxError, match="symlinks are not followed"):  # the supervisor follows no link
            sb.write_file("/app/escape/x", "x")


def shell_until(sb: Sandbox, keys: str, needle: str, timeout: float = 30) -> tuple[ShellOutput, str]:
    """Type `keys`, then read on (as an agent does) until `needle` shows: a loaded machine may print the
    terminal's echo of the line well before the command's own output. The first call's result, and all text."""
    first = sb.shell(keys)
    text, deadline = first.text, time.monotonic() + timeout
    while needle not in text and time.monotonic() < deadline:
        text += sb.shell("", wait_s=1).text
    return first, text


def wait_until(ok, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not ok():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_the_interactive_shell_keeps_its_state_until_reset(image_cfg):
    with Sandbox(image_cfg) as sb:  # each needle is output only a command prints, never the typed line's echo
        first, text = shell_until(sb, "cd /tmp && X=5 && echo ready\n", "\nready\n")
        assert first.started and first.alive and "\nready\n" in text
        nxt, text = shell_until(sb, "pwd; echo $X; id -u\n", "\n/tmp\n5\n0\n")
        assert not nxt.started and "\n/tmp\n5\n0\n" in text  # the same shell, as the image's root
        assert sb.shell("sleep 100\n", wait_s=0.3).text.startswith("sleep 100")
        while "sleep" not in sb.exec("cat /proc/*/comm").text:  # Ctrl-C only once it runs: before, bash took it
            time.sleep(0.05)
        for _ in range(5):  # Ctrl-C until sleep is gone (once, on a loaded CI machine, one was not enough)
            sb.shell("\x03", wait_s=1)
            if wait_until(lambda: "sleep" not in sb.exec("cat /proc/*/comm").text, 3):
                break
        assert "sleep" not in sb.exec("cat /proc/*/comm").text
        assert "\nafter\n" in shell_until(sb, "echo af''ter\n", "\nafter\n")[1]  # run, not just echoed
        gone = sb.shell("exit\n", wait_s=10, quiet_s=10)  # returns when its terminal closes, however loaded
        assert not gone.alive and sb.shell("pwd\n").started  # a new one, in the WORKDIR again
        sb.shell("Z=9; sleep 300 &\n")
        sb.reset()
        again, text = shell_until(sb, "echo ${Z:-unset}; cat /proc/*/comm | grep -c sleep\n", "\nunset\n0\n")
        assert again.started and "\nunset\n0\n" in text


def test_a_pool_keeps_warm_sandboxes_per_image_and_hands_them_back_clean(image_cfg):
    from temper.sandbox import SandboxPool

    with SandboxPool(image_cfg.model_copy(update={"image": None, "pool_size": 1})) as host_pool:
        pool = host_pool.image_pool(image_cfg.image)
        assert host_pool.image_pool(image_cfg.image) is pool  # one per image and limits
        assert pool.wait_ready(30)
        sb = pool.acquire()
        assert sb.warm and sb.mode == "image"
        sb.exec("echo dirty > /root/left; sleep 300 &")
        pool.release(sb)
        assert pool.wait_ready(30)
        again = pool.acquire()
        r = again.exec("cat /root/left; cat /proc/*/comm")
        assert again.warm and b"No such file" in r.stderr and b"sleep" not in r.stdout
        pool.release(again)
    assert pool._closed  # closed with its parent


def test_the_writable_layer_is_bounded_on_disk_by_disk_mb(image_cfg):
    cfg = image_cfg.model_copy(update={"limits": image_cfg.limits.model_copy(update={"disk_mb": 32,
                                                                                    "file_size_mb": 256})})
    with Sandbox(cfg) as sb:
        r = sb.exec("head -c 50000000 /dev/zero > /tmp/big; echo $?; stat -c %s /tmp/big")
        assert r.stdout.splitlines()[0] != b"0" and b"No space left on device" in r.stderr
        assert int(r.stdout.splitlines()[1]) <= 32 << 20 and r.limit == "disk"
        assert sb.exec("rm /tmp/big && head -c 1000000 /dev/zero > /tmp/small").exit_code == 0  # room again
        upper = sb._live()._upper
        assert os.stat(upper).st_dev != os.stat(upper.parent).st_dev  # a filesystem of its own, on disk
    assert not upper.exists() and not upper.with_suffix(".img").exists()  # gone with the sandbox


@pytest.fixture
def test_host():
    """A host of the test's own: a network namespace behind a veth pair (this machine is 10.213.7.1 on it),
    answering any request on 10.213.7.2:8089 with one line of HTTP."""
    tag = f"{os.getpid() % 100000}"
    ns, outer, inner = f"temper-th-{tag}", f"tth{tag}a", f"tth{tag}b"
    ip = shutil.which("ip")
    assert ip, "iproute2 (ip) is needed"

    def run(*args: str) -> None:
        subprocess.run([ip, *args], check=True, capture_output=True)

    run("netns", "add", ns)
    server = None
    try:
        run("link", "add", outer, "type", "veth", "peer", "name", inner, "netns", ns)
        run("addr", "add", "10.213.7.1/30", "dev", outer)
        run("link", "set", outer, "up")
        run("-n", ns, "addr", "add", "10.213.7.2/30", "dev", inner)
        run("-n", ns, "link", "set", inner, "up")
        code = ("import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
                "s.bind(('10.213.7.2', 8089)); s.listen()\nwhile True:\n c, _ = s.accept(); c.settimeout(5)\n"
                " try:\n  got = b''\n  while b'\\r\\n\\r\\n' not in got and (more := c.recv(65536)): got += more\n"
                "  c.sendall(b'HTTP/1.0 200 OK\\r\\n\\r\\nhello from the test host\\n'); c.shutdown(socket.SHUT_WR)\n"
                "  while c.recv(65536): pass\n"  # the whole request read, the reply sent, then closed: never a reset
                " except OSError: pass\n c.close()")
        server = subprocess.Popen([ip, "netns", "exec", ns, sys.executable, "-c", code])
        time.sleep(0.5)
        yield "10.213.7.2"
    finally:
        if server is not None:
            server.kill()
            server.wait()
        subprocess.run([ip, "link", "del", outer], capture_output=True)  # the pair, at once (a netns goes lazily)
        subprocess.run([ip, "netns", "del", ns], capture_output=True)


@pytest.mark.e2e
def test_egress_reaches_a_host_beyond_the_machine_but_never_its_loopback(image_cfg, test_host):
    local = socket.socket()
    local.bind(("127.0.0.1", 0))
    local.listen()
    port = local.getsockname()[1]
    reach = f"exec 3<>/dev/tcp/{test_host}/8089 && printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3 && tail -n 1 <&3"
    try:
        with Sandbox(image_cfg) as closed:  # loopback only: no route out
            assert closed.exec(reach, timeout=10).exit_code != 0
        egress = image_cfg.model_copy(update={"image": image_cfg.image.model_copy(update={"network": "egress"})})
        with Sandbox(egress) as sb:
            r = sb.exec(reach, timeout=10)
            assert r.stdout == b"hello from the test host\n", r.stderr
            assert sb.exec("cat /etc/resolv.conf").stdout == b"nameserver 10.0.2.3\n"
            for host in ("127.0.0.1", "10.0.2.2"):  # its own loopback; the gateway, which is not the host's
                assert sb.exec(f"echo x > /dev/tcp/{host}/{port}", timeout=10).exit_code != 0, host
            slirp = sb._live()._egress
            assert slirp is not None and slirp.poll() is None
        assert slirp.poll() is not None  # stopped with the sandbox
    finally:
        local.close()


FETCH = "import urllib.request as u, sys\ntry:\n print(u.urlopen(sys.argv[1], timeout=10).read().decode(), end='')\n" \
        "except u.HTTPError as e:\n print(e.code, e.read().decode(), end='')"
TUNNEL = """
import socket, sys
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(f"CONNECT {sys.argv[1]} HTTP/1.1\\r\\n\\r\\n".encode())
reply = s.recv(4096)
if b" 200 " in reply:  # the tunnel is up: speak to the far end through it
    s.sendall(b"GET / HTTP/1.0\\r\\n\\r\\n")
    reply = b"".join(iter(lambda: s.recv(4096), b""))
print(reply.decode().splitlines()[-1])
"""


@pytest.mark.e2e
def test_egress_to_an_allowlist_goes_through_the_proxy_and_nowhere_else(image_cfg, test_host):
    local = socket.socket()
    local.bind(("127.0.0.1", 0))
    local.listen()
    port = local.getsockname()[1]
    hosts = [f"{test_host}:8089", "127.0.0.1:*", "10.213.7.1"]  # the last two are this machine: never reached
    image = image_cfg.image.model_copy(update={"network": "egress", "egress_hosts": hosts})
    try:
        with Sandbox(image_cfg.model_copy(update={"image": image})) as sb:
            assert sb.exec(["python3", "-c", FETCH, f"http://{test_host}:8089/"]).stdout == \
                b"hello from the test host\n"  # plain HTTP through the proxy (what apt does)
            assert sb.exec(["python3", "-c", TUNNEL, f"{test_host}:8089"]).stdout == \
                b"hello from the test host\n"  # a CONNECT tunnel (what pip, npm and git do for HTTPS)
            r = sb.exec(["python3", "-c", FETCH, f"http://{test_host}:8090/"])
            assert r.stdout == f"403 temper: {test_host}:8090 is not on this sandbox's egress allowlist\n".encode()
            for mine in (f"127.0.0.1:{port}", "10.213.7.1:22"):  # allowlisted, yet this machine
                assert b"is this machine" in sb.exec(["python3", "-c", TUNNEL, mine]).stdout, mine  # a 403
            direct = f"exec 3<>/dev/tcp/{test_host}/8089 && echo reached"  # ignoring the proxy: no route at all
            assert sb.exec(direct, timeout=10).exit_code != 0
            assert sb.exec("echo $HTTPS_PROXY $no_proxy").stdout == b"http://127.0.0.1:3128 localhost,127.0.0.1,::1\n"
            proxy = sb._live()._egress
            assert proxy.connections == {"allowed": 4, "refused": 1}
            hog = ("import socket, time\nheld = [socket.create_connection(('127.0.0.1', 3128)) for _ in range(64)]\n"
                   "time.sleep(0.5)\ns = socket.create_connection(('127.0.0.1', 3128))\nprint(s.recv(100).decode())")
            assert b"503 Service Unavailable" in sb.exec(["python3", "-c", hog]).stdout  # a host thread each: bounded
            seen = [(r["host"], r["port"], r["allowed"]) for r in _audit_records(sb) if r["op"] == "egress"]
            assert (test_host, 8090, False) in seen and seen.count((test_host, 8089, True)) == 2
    finally:
        local.close()


def _audit_records(sb: Sandbox) -> list[dict]:
    import json

    return [rec for line in Path(sb.audit.path).read_text().splitlines()
            if (rec := json.loads(line))["sandbox"] == sb.id]


def test_a_crashed_runs_writable_layer_is_swept_by_the_next(image_cfg, tmp_path):
    from temper.sandbox import leftovers

    code = ("import sys, time\nfrom temper.sandbox import Sandbox, SandboxConfig\n"
            f"sb = Sandbox(SandboxConfig.model_validate_json({image_cfg.model_dump_json()!r}))\n"
            "print(sb._live()._upper, flush=True)\ntime.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        upper = Path(proc.stdout.readline().strip())
        assert os.path.ismount(upper) and upper.with_name(upper.name + ".img").exists()
    finally:
        proc.kill()  # no cleanup runs
        proc.wait()
    assert os.path.ismount(upper)  # left behind
    swept = leftovers.sweep(image_cfg.state_dir)
    assert [s.path for s in swept] == [upper] and swept[0].what == leftovers.UPPER
    assert not upper.exists() and not upper.with_name(upper.name + ".img").exists()


def test_sandbox_check_says_what_image_sandboxes_have_here(image_cfg):
    from temper.sandbox.check import check

    feats = {f.name: f for f in check(image_cfg.model_copy(update={"image": None}))}
    assert feats["image sandboxes"].ok and "65,536" in feats["image sandboxes"].detail
    assert feats["image disk limit"].ok and "loop device" in feats["image disk limit"].detail
    assert feats["image egress"].ok == (shutil.which("slirp4netns") is not None)
