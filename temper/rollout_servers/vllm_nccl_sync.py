"""vLLM's own NCCL weight-transfer engine, driven from temper's trainer (`orchestrator.vllm.weight_sync:
nccl`, GPU machines): each step's weights go from the trainer's GPU straight into a running server's GPUs
as NCCL broadcasts, without a copy through the disk.

    sync = NcclWeightSync(client, workers=1, master_address="10.0.0.5")
    await sync.push(state_dict, version=3)   # the first push also opens the NCCL group with the server

One NCCL group per server: the trainer is rank 0 (the sender), the server's workers ranks 1..workers.
The server must run with `--weight-transfer-config '{"backend": "nccl"}'` (managed servers do).
Each push is vLLM's RL round trip: pause with requests kept, start_weight_update, update_weights on
the server while the trainer broadcasts, finish_weight_update, then the prefix cache is dropped and
the version tagged as in the filesystem hand-off (`VllmClient.update_weights`).

The trainer side is vLLM's `NCCLTrainerWeightTransferEngine` and its HTTP control client: this module
needs vLLM importable by temper's own interpreter and a CUDA device (`require_nccl` says so in one line
otherwise). Nothing here runs on a CPU machine; `tests/vllm/test_vllm_nccl.py` checks the weight
source against vLLM's engine contract there.
"""

import asyncio
import importlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from temper.errors import ConfigError
from temper.net import free_port
from temper.rollout_servers.vllm_client import VllmClient


def vllm_importable() -> bool:
    """Can this interpreter import vLLM's trainer-side transfer engine? (A bare find_spec("vllm") is
    fooled by any folder named vllm in the working directory, e.g. a run folder's.)"""
    try:
        importlib.import_module("vllm.distributed.weight_transfer.nccl_engine")
    except ImportError:
        return False
    return True


def require_nccl() -> None:
    """One line naming the field when this machine cannot run the NCCL weight transfer."""
    missing = []
    if not torch.cuda.is_available():
        missing.append("a CUDA device (this machine has none)")
    if not vllm_importable():
        missing.append("vLLM importable by temper's own interpreter (pip install vllm into temper's venv)")
    if missing:
        raise ConfigError([f"orchestrator.vllm.weight_sync: nccl needs {' and '.join(missing)}; "
                           "use weight_sync: filesystem here"])


def state_dict_source(state: Mapping[str, torch.Tensor], device: torch.device | str) -> Any:
    """A vLLM `WeightSource` over a state dict under HF names: metadata without copying, then each tensor
    on `device` (the broadcast reads device memory), in the same order. Its `state` is replaced per push
    (the names, dtypes and shapes stay those of the first: vLLM sized its receive buffers on them)."""
    from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource, materialize_full_tensor

    class StateDictSource(WeightSource):
        def __init__(self) -> None:
            self.state = dict(state)

        def metadata(self) -> list[ParamMeta]:
            return [ParamMeta(k, v.dtype, tuple(v.shape)) for k, v in self.state.items()]

        def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
            for k, v in self.state.items():  # a DTensor (FSDP2 shard) is gathered here, once
                yield k, materialize_full_tensor(v).detach().to(device, non_blocking=True).contiguous()

    return StateDictSource()


class NcclWeightSync:
    """The NCCL weight transfer to one vLLM server (its group is opened on the first push)."""

    def __init__(self, client: VllmClient, workers: int, master_address: str, timeout_s: float = 600.0):
        self.client = client
        self.workers = workers  # the server's GPU workers (tensor x pipeline parallel size)
        self.master_address = master_address  # this trainer's address as the server's workers reach it
        self.timeout_s = timeout_s
        self.engine: Any = None
        self.source: Any = None

    def _open(self, state: Mapping[str, torch.Tensor]) -> None:
        from vllm.distributed.weight_transfer.clients import HTTPVLLMWeightSyncClient
        from vllm.distributed.weight_transfer.nccl_engine import (
            NCCLTrainerInitInfo,
            NCCLTrainerWeightTransferEngine,
        )

        self.source = state_dict_source(state, torch.device("cuda", torch.cuda.current_device()))
        info = NCCLTrainerInitInfo(master_address=self.master_address, master_port=free_port(),
                                   world_size=1 + self.workers, rank=0)
        self.engine = NCCLTrainerWeightTransferEngine.trainer_init(
            info, client=HTTPVLLMWeightSyncClient(self.client.base, timeout=self.timeout_s), source=self.source)

    def _send(self, state: Mapping[str, torch.Tensor]) -> None:
        if self.engine is None:
            self._open(state)
        self.source.state = dict(state)
        self.engine.send_weights()  # start_weight_update, update_weights beside the broadcast, finish

    async def push(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        await self.client.update_weights(lambda: asyncio.to_thread(self._send, state), version)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.shutdown()
            self.engine = None


__all__ = ["NcclWeightSync", "require_nccl", "state_dict_source", "vllm_importable"]
