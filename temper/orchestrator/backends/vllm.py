"""The vLLM backend: rollout workers in this process, one per vLLM server, each generating on its
server through `VllmClient` (token ids in and out), all sharing one sandbox pool.

Servers are started here (`orchestrator.vllm.num_servers`, managed: stopped with the run) or given
by URL (`orchestrator.vllm.urls`, attached: checked before any work). A group's n episodes go to one
server (the pipeline sends a group to one worker), so they share its prefix cache.

After each trainer step the weights are written once as safetensors under `weights_dir` and every
live server loads them in place (pause with requests kept, load, drop the prefix cache, tag the
version, resume); with `weight_sync: nccl` (GPU) they are broadcast into each server by vLLM's NCCL
weight transfer instead (`vllm_nccl_sync`). The latency per server goes into metrics.jsonl
(`weight_update_ms/server<i>`).

A server that dies or stops answering (its process exits, or /health misses twice in a row; a health
check runs every health_interval_s) is marked down: the episodes in flight on it end at once as
infrastructure failures, retried on another server, never a reward of 0; the run goes on with the
servers left and stops with one line (`BackendExhausted`, the store resumable) when none is left.
"""

import asyncio
import contextlib
import json
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import torch

from temper.envs import parse_spec
from temper.episode_runner import EpisodeRunner
from temper.orchestrator.backends.protocol import Attempt, BackendExhausted
from temper.orchestrator.rollout_worker import RolloutWorker, WorkerSpec, sum_counters
from temper.rollout_servers.vllm_client import VllmClient
from temper.rollout_servers.vllm_config import VllmConfig
from temper.rollout_servers.vllm_server import VllmServer, VllmServerError, core_shares, probe
from temper.trajectory import FailureKind

log = logging.getLogger(__name__)
SERVER_FAILURES = (FailureKind.ENGINE_ERROR, FailureKind.HARNESS_TIMEOUT)  # what a dead or hung server looks like


class VllmBackend:
    def __init__(self, model: str, cfg: VllmConfig, suite_specs: list[str], spec: WorkerSpec, sandbox: Any = None,
                 run_dir: Path | None = None, dtype: str = "float32"):
        from temper.envs.sandboxes import make_pool
        from temper.models import Tokenizer, resolve_model

        self.cfg = cfg
        if cfg.weight_sync == "nccl":  # before any server starts: a CPU machine cannot run it
            from temper.rollout_servers.vllm_nccl_sync import require_nccl
            require_nccl()
        folder = resolve_model(model)
        tokenizer = Tokenizer.from_folder(folder)
        root = Path(run_dir) if run_dir is not None else Path.cwd() / "vllm"
        # absolute: servers resolve paths from their own working folder
        self.weights_dir = (Path(cfg.weights_dir) if cfg.weights_dir else root / "vllm" / "weights").resolve()
        self.servers: list[VllmServer] = []
        self.attached = bool(cfg.urls)  # the trainer pushes its weights first: an attached server may hold any
        if cfg.urls:
            urls, name = [u.rstrip("/").removesuffix("/v1") for u in cfg.urls], cfg.model
            for i, url in enumerate(urls):  # before any work: a wrong URL is one line, not a run of failures
                name = probe(url, name, f"orchestrator.vllm.urls[{i}]: {url}", cfg.health_timeout_s * 6,
                             extension=cfg.weight_sync == "filesystem")
        else:
            urls, name = self._start_servers(folder, root / "vllm", dtype), cfg.served_model_name
        try:  # a failure from here on must not leave the servers just started running
            suites = [parse_spec(s) for s in suite_specs]
            self.pool = make_pool(sandbox, size=8) if any(s.needs_sandbox for s in suites) else None
        except BaseException:
            self._stop_servers()
            raise
        self.clients = [VllmClient(url, name, tokenizer, cfg.request_timeout_s) for url in urls]
        self.nccl = nccl_syncs(self.clients, cfg) if cfg.weight_sync == "nccl" else None
        self.workers = [RolloutWorker(EpisodeRunner(c, tokenizer, sandboxes=self.pool, name=f"{name} @ {c.base}"),
                                      suites, spec.salted(i)) for i, c in enumerate(self.clients)]
        self.num_workers = len(self.workers)
        self.down: dict[int, str] = {}
        self._events: dict[tuple[int, int], asyncio.Event] = {}
        self._monitor: asyncio.Task | None = None
        self.update_ms: dict[int, float] = {}
        self.write_ms: float | None = None

    def _start_servers(self, folder: Path, log_dir: Path, dtype: str) -> list[str]:
        """Start every server at once (their start-ups overlap), then wait for each; one failing stops all."""
        shares = core_shares(self.cfg.num_servers)
        try:
            for i in range(self.cfg.num_servers):
                self.servers.append(VllmServer.start(i, folder, self.cfg, log_dir, threads=shares[i], dtype=dtype))
            for s in self.servers:
                s.wait_ready(self.cfg.startup_timeout_s, self.cfg.served_model_name)
        except BaseException:
            self._stop_servers()
            raise
        log.info("vLLM servers ready: %s", ", ".join(s.name for s in self.servers))
        (log_dir / "servers.json").write_text(json.dumps(
            [{"index": s.index, "url": s.url, "pid": s.pid, "log": str(s.log_path)} for s in self.servers], indent=1))
        return [s.url for s in self.servers]

    # ---- episodes ---------------------------------------------------------------------------
    def _live(self, worker: int) -> int:
        live = [i for i in range(self.num_workers) if i not in self.down]
        if not live:
            raise BackendExhausted("every vLLM server is down; last: " + list(self.down.values())[-1]
                                   + "; the store is resumable: temper train --resume RUN_DIR")
        return worker if worker in live else live[worker % len(live)]

    async def run_episode(self, worker: int, suite_index: int, task_id: str, group_id: str, index: int,
                          eval_mode: bool = False, seed: int | None = None) -> Attempt:
        """The episode on server `worker` (another one if it is down). If the server goes down under it
        (the health monitor saw it dead or hung), the episode ends at once as an engine failure."""
        i = self._live(worker)
        episode = await self._unless_down(i, self.workers[i].run_episode(suite_index, task_id, group_id, index,
                                                                         eval_mode, seed))
        if episode.cancelled():
            return Attempt([], 1, FailureKind.ENGINE_ERROR, self.down.get(i, f"vLLM server {i} is down"))
        try:
            attempt = episode.result()
        except Exception:
            await self._check(i)
            raise
        if attempt.failure in SERVER_FAILURES:
            await self._check(i)
        return attempt

    async def _unless_down(self, i: int, work: Any) -> asyncio.Future:
        """Run `work` until it ends or server i is marked down (then it is cancelled); the finished future."""
        self._ensure_monitor()
        task = asyncio.ensure_future(work)
        down = asyncio.ensure_future(self._down_event(i).wait())
        try:
            await asyncio.wait({task, down}, return_when=asyncio.FIRST_COMPLETED)
            if not task.done():  # a dead server's requests fail at once by themselves: cancel only a hung one's
                await asyncio.wait({task}, timeout=self.cfg.health_timeout_s)
        finally:  # also when this call is cancelled: the work must not run on, orphaned
            down.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        return task

    def _down_event(self, i: int) -> asyncio.Event:
        """Set when server i is marked down (one per event loop: asyncio events belong to one)."""
        key = (id(asyncio.get_running_loop()), i)
        if key not in self._events:
            self._events[key] = asyncio.Event()
            if i in self.down:
                self._events[key].set()
        return self._events[key]

    def _ensure_monitor(self) -> None:
        """A health check of every live server each health_interval_s, on the running loop: a server that
        stops answering is found even while no request to it fails yet (a hung one never would)."""
        loop = asyncio.get_running_loop()
        if self._monitor is None or self._monitor.done() or self._monitor.get_loop() is not loop:
            self._monitor = loop.create_task(self._watch())

    async def _watch(self) -> None:
        misses: dict[int, int] = {}
        while True:
            await asyncio.sleep(self.cfg.health_interval_s)
            for i in [i for i in range(self.num_workers) if i not in self.down]:
                why = await self._probe(i)
                misses[i] = misses.get(i, 0) + 1 if why else 0
                if why and (misses[i] >= 2 or why.startswith("its process")):  # one slow answer is not death
                    self._mark_down(i, why)

    async def _check(self, i: int) -> bool:
        """Is server i still up (after a failed request)? If not, it is marked down."""
        if i in self.down:
            return False
        why = await self._probe(i)
        if why is not None:
            self._mark_down(i, why)
        return why is None

    async def _probe(self, i: int) -> str | None:
        """Why server i is down (its process exited, or /health did not answer 200 within
        health_timeout_s), or None."""
        if i < len(self.servers) and not self.servers[i].alive():
            return f"its process exited (code {self.servers[i].process.returncode})"
        try:
            r = await self.clients[i]._http().get("/health", timeout=self.cfg.health_timeout_s)
        except Exception as exc:  # httpx's errors, and anything else a broken connection raises
            return f"/health failed: {type(exc).__name__}: {exc}"
        return None if r.status_code == 200 else f"/health answered HTTP {r.status_code}"

    def _mark_down(self, i: int, why: str) -> None:
        if i in self.down:
            return
        name = self.servers[i].name if i < len(self.servers) else f"vLLM server {i} ({self.clients[i].base})"
        self.down[i] = f"{name} is down: {why}"
        for (_, j), event in self._events.items():
            if j == i:
                event.set()
        log.error("%s; its episodes are retried on the %d server(s) left", self.down[i],
                  self.num_workers - len(self.down))

    # ---- weights ----------------------------------------------------------------------------
    async def push_weights(self, state: dict, version: int) -> None:
        """Write the weights once, then load them into every live server (in parallel); with
        weight_sync: nccl, broadcast them into each live server instead."""
        live = [i for i in range(self.num_workers) if i not in self.down]
        folder = None
        if self.nccl is not None:
            loads = {i: lambda i=i: self.nccl[i].push(state, version) for i in live}
        else:
            folder = self.weights_dir / f"v{version}"
            start = time.perf_counter()
            await asyncio.to_thread(write_safetensors, state, folder)
            self.write_ms = (time.perf_counter() - start) * 1000
            loads = {i: lambda i=i: self.clients[i].load_weights_from(str(folder), version) for i in live}
        try:
            await asyncio.gather(*(self._load(i, loads[i], version) for i in live))
        finally:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
        self._live(0)  # raises when the update found every server down

    async def _load(self, i: int, load: Callable[[], Awaitable[None]], version: int) -> None:
        """`load` (the weights into server i) while its worker holds no request half-way; its latency."""
        start = time.perf_counter()
        done = await self._unless_down(i, self.workers[i].client.while_held(load))
        if done.cancelled():  # it went down meanwhile
            return
        try:
            done.result()
        except Exception as exc:
            if await self._check(i):  # alive but refused the weights: half-loaded weights must not roll out
                raise VllmServerError(f"vLLM server {i} ({self.clients[i].base}) failed to load the weights of "
                                      f"version {version}: {exc}") from None
            return
        self.update_ms[i] = (time.perf_counter() - start) * 1000

    # ---- reporting and shutdown ---------------------------------------------------------------
    def counters(self) -> dict[str, float]:
        return sum_counters(w.counters() for w in self.workers)

    def gauges(self) -> dict[str, float]:
        g: dict[str, float] = {"servers_up": float(self.num_workers - len(self.down))}
        if self.update_ms:
            live = [ms for i, ms in self.update_ms.items() if i not in self.down]
            g["weight_update_ms"] = sum(live) / max(1, len(live))
            g.update({f"weight_update_ms/server{i}": ms for i, ms in sorted(self.update_ms.items())})
        if self.write_ms is not None:
            g["weight_write_ms"] = self.write_ms
        return g

    def close(self) -> None:
        if self._monitor is not None:
            self._monitor.cancel()
        if self.pool is not None:
            self.pool.close()
        for sync in self.nccl or []:
            sync.close()
        self._stop_servers()
        shutil.rmtree(self.weights_dir, ignore_errors=True)

    def _stop_servers(self) -> None:
        for s in self.servers:
            s.stop()


def nccl_syncs(clients: list[VllmClient], cfg: VllmConfig) -> list[Any]:
    from temper.rollout_servers.vllm_nccl_sync import NcclWeightSync

    return [NcclWeightSync(c, cfg.tensor_parallel_size, cfg.nccl_master_address, cfg.request_timeout_s)
            for c in clients]


def write_safetensors(state: dict, folder: Path) -> None:
    """The full state dict as one safetensors file (tied weights saved apart: safetensors refuses shared storage)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().to("cpu").contiguous().clone() for k, v in state.items() if isinstance(v, torch.Tensor)}
    save_file(tensors, str(folder / "model.safetensors"))
    (folder / "model.safetensors").chmod(0o644)


__all__ = ["VllmBackend", "write_safetensors"]
