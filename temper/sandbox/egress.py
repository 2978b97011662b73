"""Egress for an image sandbox whose task asks for the internet (`ImageRoot.network: egress`): slirp4netns
gives its network namespace a tap device with a NAT route through the host's own network stack (so through
the host's configured proxies), a DNS forwarder at 10.0.2.3, and no route to the host's loopback
(`--disable-host-loopback`): temper serve, vLLM, the episode endpoints and Ray stay out of reach. slirp4netns
runs sandboxed and seccomp-filtered itself, one per sandbox, stopped with it."""

import os
import select
import shutil
import subprocess

from temper.sandbox.errors import SandboxError

DNS = "10.0.2.3"


def start(pid: int, sandbox_id: str) -> subprocess.Popen:
    """slirp4netns on the network namespace of host pid `pid`, once its tap device is up."""
    exe = shutil.which("slirp4netns")
    if exe is None:
        raise SandboxError(f"sandbox {sandbox_id}: network egress needs slirp4netns (apt-get install slirp4netns, "
                           f"or bash scripts/setup.sh --with-images)")
    ready_r, ready_w = os.pipe()
    proc = subprocess.Popen([exe, "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                             "--enable-seccomp", f"--ready-fd={ready_w}", str(pid), "tap0"],
                            pass_fds=(ready_w,), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    os.close(ready_w)
    try:
        ready, _, _ = select.select([ready_r], [], [], 10.0)
        if not ready or not os.read(ready_r, 1):
            stop(proc)
            err = proc.stderr.read().decode(errors="replace").strip() if proc.stderr else ""
            raise SandboxError(f"sandbox {sandbox_id}: slirp4netns did not bring the network up: {err[-300:]}")
    finally:
        os.close(ready_r)
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
