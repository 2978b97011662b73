"""The trainer as N FSDP2 ranks that `temper train` spawns itself (`algorithm.trainer.world_size`).

`TrainerRank` is one rank's body: it joins the process group, loads the model and builds a `Trainer`
in its own process; its constructor takes plain picklable values, so a multiprocessing child (here)
or a Ray actor (temper.orchestrator.ray_trainer_group) can host it. `RankGroup` is the driver's side
both share, used as train.py uses a `Trainer`: it sends every call to all ranks and waits for their
replies. `TrainerGroup` hosts the ranks in spawned processes and watches each meanwhile, so a rank
that dies or raises stops the run with one line (rank, pid, last log lines), never a hang.

Per step the ranks get the same trajectories (and so, as under torchrun, the same global batch);
rank 0 gathers the full weights once, after the update, and returns them with its StepStats.
Checkpoints are written by every rank (torch.distributed.checkpoint shards, checkpoint.py).
"""

import contextlib
import os
import signal
import socket
import sys
import traceback
from abc import ABC, abstractmethod
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch
import torch.multiprocessing as mp  # its pickler sends tensors through shared memory, not the pipe

from temper.errors import TemperError
from temper.logs import log_tail
from temper.net import free_port
from temper.rl import distributed as dist
from temper.rl.checkpoint import load_trainer_checkpoint, rng_state, save_trainer_checkpoint, set_rng_state
from temper.rl.config import RLConfig
from temper.rl.stats import StepStats
from temper.trajectory import Trajectory

LOG_TAIL = 3  # log lines a dead rank's error quotes
CLOSE_S = 10.0  # how long a closing rank may take before it is killed


class TrainerRank:
    """One rank: process group + model + Trainer. Replies are plain values; rank 0's carry the full weights."""

    def __init__(self, model: str, cfg: RLConfig, rank: int, world_size: int, master_port: int,
                 device: str = "cpu", threads: int = 1, seed: int = 0, master_addr: str = "127.0.0.1",
                 gpu: int | None = None, temperature: float = 1.0):
        """`gpu`: the CUDA device index to use (a Ray actor sees only the GPU Ray gave it: 0); None: the rank's.
        `temperature`: the rollouts' sampling temperature (Trainer's)."""
        from temper.models import load_model
        from temper.rl.trainer import Trainer
        from temper.runtime import seed_everything

        if threads > 0:
            torch.set_num_threads(threads)
        seed_everything(seed)
        place = torch.device(device)
        if place.type == "cuda":  # one GPU per rank (NCCL refuses two ranks on one device)
            index = gpu if gpu is not None else rank if place.index is None else place.index + rank
            place = torch.device("cuda", index)
            torch.cuda.set_device(place)
        dist.init_rank(rank, world_size, master_port, "nccl" if place.type == "cuda" else "gloo", master_addr)
        loaded = load_model(model, device=place)
        self.tokenizer = loaded.tokenizer
        self.rank = rank
        self._gathered: tuple[int, dict[str, torch.Tensor]] | None = None  # (version, full weights; {} off rank 0)
        self.trainer = Trainer(loaded.model, cfg, pad_id=loaded.tokenizer.pad_token_id, temperature=temperature)
        print(f"rank {rank}/{world_size} pid {os.getpid()} on {place} ({dist.comm_device()} collectives)", flush=True)

    def info(self) -> dict[str, Any]:
        return {"rank": self.rank, "pid": os.getpid(), "dtype": self.trainer.dtype,
                "policy_version": self.trainer.policy_version}

    def step(self, trajectories: list[Trajectory]) -> tuple[StepStats, dict[str, torch.Tensor] | None]:
        """The step's stats and (rank 0, unless the step was skipped) the full weights after it."""
        stats = self.trainer.step(trajectories)
        m = stats.as_metrics()
        print(f"step -> version {stats.policy_version}: loss {m.get('loss', float('nan')):.6g}", flush=True)
        return stats, None if stats.skipped else self.policy_state_dict()

    def policy_state_dict(self) -> dict[str, torch.Tensor] | None:
        state = self.trainer.policy_state_dict()  # a collective: every rank takes part
        self._gathered = (self.trainer.policy_version, state)  # the checkpoint of this version reuses it
        return state if self.rank == 0 else None

    def save_checkpoint(self, root: str, metrics: dict[str, float], data_cursor: object,
                        rng: dict[str, Any] | None = None) -> str:
        self.trainer.data_cursor = data_cursor
        # every rank decides alike (same versions): all reuse the step's gather, or all gather again
        g = self._gathered
        policy = g[1] if g is not None and g[0] == self.trainer.policy_version else None
        path = save_trainer_checkpoint(self.trainer, Path(root), metrics, self.tokenizer, rng, policy)
        print(f"saved {path}", flush=True)
        return str(path)

    def load_checkpoint(self, path: str) -> dict[str, Any]:
        ckpt, rng = load_trainer_checkpoint(self.trainer, Path(path))
        self._gathered = None
        t = self.trainer
        print(f"loaded {ckpt} (policy version {t.policy_version})", flush=True)
        return {"checkpoint": str(ckpt), "policy_version": t.policy_version, "data_cursor": t.data_cursor, "rng": rng}

    def close(self) -> None:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def log_to(log: str) -> None:
    """This process's output (fds 1 and 2: native code's too) appended to a rank's log file."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def reply(call: Any, *args: Any) -> tuple[str, Any]:
    """("ok", call(*args)), or ("error", "Type: message") with the traceback in the rank's log: the driver
    stops the run, and the rank waits to be closed."""
    try:
        return "ok", call(*args)
    except Exception as e:
        traceback.print_exc()
        sys.stderr.flush()
        return "error", f"{type(e).__name__}: {e}"


def _host(conn: Connection, log: str, kwargs: dict[str, Any]) -> None:
    """A rank's process: its output into its log file, then calls from the pipe until close or EOF."""
    log_to(log)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle: it closes the ranks
    body = None

    def start() -> dict[str, Any]:
        nonlocal body
        body = TrainerRank(**kwargs)
        return body.info()

    try:
        kind, value = reply(start)
        conn.send((kind, value))
        while body is not None:
            method, args = conn.recv()
            conn.send(reply(getattr(body, method), *args))
            if method == "close":
                return
    except EOFError:  # the driver is gone (killed): nothing left to serve
        return
    finally:
        sys.stderr.flush()
        if body is not None:
            body.close()


def _tail(path: Path, n: int = LOG_TAIL) -> str:
    lines = log_tail(path, n)
    return "(no log)" if lines is None else " | ".join(lines) or "(empty log)"


def rank_error(rank: int, pid: int | None, what: str, log: Path, where: str = "") -> TemperError:
    """The one line a failed rank stops the run with: rank, pid (and `where`: its node), what happened, its log."""
    return TemperError(f"trainer rank {rank} (pid {pid}{where}) {what}; last log lines of {log}: {_tail(log)}; "
                       f"resume the run with --resume from its last checkpoint")


class RankGroup(ABC):
    """The driver's side of `world_size` TrainerRanks, behind the interface train.py uses of a Trainer.
    Hosts implement `_call` (one call on every rank, every reply, or one TemperError line) and `close`."""

    world_size: int
    logs: list[Path]

    def _started(self, infos: list[dict[str, Any]], nodes: list[str]) -> None:
        self.pids: list[int] = [i["pid"] for i in infos]
        self.nodes = nodes  # where each rank ran (the audit log's trainer_nodes)
        self.dtype: str = infos[0]["dtype"]
        self.policy_version: int = infos[0]["policy_version"]
        self.data_cursor: object = None
        self._policy: dict[str, torch.Tensor] | None = None  # rank 0's gathered weights of policy_version

    @abstractmethod
    def _call(self, method: str, *args: Any) -> list[Any]: ...

    @abstractmethod
    def close(self) -> None: ...

    # ---- the Trainer interface train.py uses ------------------------------------------------------
    def step(self, trajectories: list[Trajectory]) -> StepStats:
        stats, policy = self._call("step", trajectories)[0]
        if policy is not None:
            self._policy = policy
        self.policy_version = stats.policy_version
        return stats

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        if self._policy is None:  # before the first step, or after a load: gather once
            self._policy = self._call("policy_state_dict")[0]
        return self._policy

    def save_checkpoint(self, root: str | Path, metrics: dict[str, float] | None = None,
                        tokenizer: object = None) -> Path:
        """Every rank writes its shards; rank 0 the HF folder (with its own copy of the tokenizer: `tokenizer`
        is accepted for a Trainer's signature) and the driver's RNG state, which a Trainer in one process records."""
        return Path(self._call("save_checkpoint", str(root), metrics or {}, self.data_cursor, rng_state())[0])

    def load_checkpoint(self, path: str | Path) -> None:
        got = self._call("load_checkpoint", str(path))[0]
        self.policy_version, self.data_cursor = got["policy_version"], got["data_cursor"]
        set_rng_state(got["rng"])
        self._policy = None


class TrainerGroup(RankGroup):
    """`world_size` TrainerRanks in spawned processes of this machine."""

    def __init__(self, model: str, cfg: RLConfig, world_size: int, log_dir: str | Path, device: str = "cpu",
                 threads: int = 1, seed: int = 0, temperature: float = 1.0):
        place = torch.device(device)
        if place.type == "cuda" and (place.index or 0) + world_size > torch.cuda.device_count():
            raise TemperError(f"algorithm.trainer.world_size={world_size} on {device}: one GPU per rank is needed, "
                              f"this machine has {torch.cuda.device_count()} CUDA device(s)")
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.world_size = world_size
        ctx = mp.get_context("spawn")
        port = free_port()
        self.procs, self.conns, self.logs = [], [], []
        for r in range(world_size):
            log = self.log_dir / f"rank_{r}.log"  # appended to: a resumed run's ranks go on in the same file
            parent, child = ctx.Pipe()
            kwargs = {"model": model, "cfg": cfg, "rank": r, "world_size": world_size, "master_port": port,
                      "device": device, "threads": threads, "seed": seed, "temperature": temperature}
            proc = ctx.Process(target=_host, args=(child, str(log), kwargs), name=f"temper-trainer-rank-{r}",
                               daemon=True)  # daemonic: the driver's exit takes the ranks with it
            proc.start()
            child.close()
            self.procs.append(proc)
            self.conns.append(parent)
            self.logs.append(log)
        self._started(self._gather(), [socket.gethostname()] * world_size)

    def close(self) -> None:
        """Ask every live rank to leave its process group and exit; kill the ones that do not in time."""
        for conn, proc in zip(self.conns, self.procs, strict=True):
            if proc.is_alive():
                with contextlib.suppress(OSError):  # it may die meanwhile
                    conn.send(("close", ()))
        for proc in self.procs:
            proc.join(CLOSE_S)
            if proc.is_alive():
                proc.kill()
                proc.join(CLOSE_S)
        for conn in self.conns:
            conn.close()

    # ---- calls and liveness ---------------------------------------------------------------------
    def _call(self, method: str, *args: Any) -> list[Any]:
        for r, conn in enumerate(self.conns):
            try:
                conn.send((method, args))
            except OSError:
                self._fail(r, None)
        return self._gather()

    def _gather(self) -> list[Any]:
        """Every rank's reply; meanwhile each rank's process is watched, so a dead one is an error, not a hang."""
        replies: dict[int, Any] = {}
        while len(replies) < self.world_size:
            waiting = [r for r in range(self.world_size) if r not in replies]
            ready = wait([self.conns[r] for r in waiting] + [self.procs[r].sentinel for r in waiting])
            for r in waiting:
                if self.conns[r] in ready or self.conns[r].poll():
                    try:
                        kind, value = self.conns[r].recv()
                    except (EOFError, OSError):
                        self._fail(r, None)
                    if kind == "error":
                        self._fail(r, value)
                    replies[r] = value
                elif self.procs[r].sentinel in ready:
                    self._fail(r, None)
        return [replies[r] for r in range(self.world_size)]

    def _fail(self, r: int, error: str | None) -> None:
        """Stop every rank, then raise one line about the culprit: a rank whose process died comes before
        one that only reported an error (a survivor's collective fails when its peer dies)."""
        # a dead process's pipe may close before the process is reaped: wait for the culprit's exit code,
        # and give the others a moment to show whether one of them died first
        self.procs[r].join(CLOSE_S if error is None else 0.5)
        for proc in self.procs:
            proc.join(0.5)
        dead = [i for i, p in enumerate(self.procs) if p.exitcode is not None and p.exitcode != 0]
        if dead:
            r, error = dead[0], None
        code = self.procs[r].exitcode
        pid = self.procs[r].pid
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(CLOSE_S)
        if error is None:
            how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            what = f"died ({how})"
        else:
            what = f"failed: {error}"
        raise rank_error(r, pid, what, self.logs[r])
