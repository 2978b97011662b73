"""`orchestrator.ray`: which Ray cluster the Ray backend runs on, and where its actors go.

The defaults run on one machine: a local cluster started for the run, no custom resources asked
for, sandboxes beside each rollout worker. On a cluster, nodes advertise resources
(`ray start --resources '{"rollout": 2}'`) and the actors ask for them, so rollout workers land on
the nodes meant for them and sandbox pools on others (e.g. CPU-only nodes). With
`algorithm.trainer.world_size > 1` the trainer ranks are actors too, in one placement group, each
asking for `trainer_resources` (temper.orchestrator.ray_trainer_group).
"""

import re
from typing import Literal

from pydantic import Field, field_validator

from temper.config import ConfigModel

_HOST_PORT = re.compile(r"^(ray://)?[A-Za-z0-9_.\-\[\]:]+:\d{1,5}$")


class RayConfig(ConfigModel):
    # None: start a local single-node cluster for the run; "auto": the cluster `ray start` last started on
    # this machine (or RAY_ADDRESS); "host:port": that cluster's head (its GCS port)
    address: str | None = None
    # what each rollout worker actor asks of its node ({"rollout": 1}; "CPU"/"GPU" are Ray's own); {}: any node
    worker_resources: dict[str, float] = Field(default_factory=dict)
    # 0: each rollout worker keeps a sandbox pool beside it (in its process); N: N sandbox pool actors, shared
    # by every worker, placed by sandbox_resources (episodes' sandbox calls cross the network to them)
    remote_sandboxes: int = Field(0, ge=0)
    sandbox_resources: dict[str, float] = Field(default_factory=dict)  # what each sandbox pool actor asks for
    sandbox_pool_size: int = Field(8, ge=0)  # warm idle sandboxes each pool actor keeps
    init_timeout_s: float = Field(600.0, gt=0)  # for every actor to start (a model loads in each worker)
    # what each trainer rank actor asks of its node (algorithm.trainer.world_size > 1; {"GPU": 1} on CUDA);
    # {}: any node. The run folder must be on a filesystem every rank's node shares (their shards go there)
    trainer_resources: dict[str, float] = Field(default_factory=dict)
    # how the ranks' placement group spreads them: PACK (as few nodes as possible), SPREAD, or the STRICT_ forms
    trainer_placement: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"

    @field_validator("address")
    @classmethod
    def _address(cls, v: str | None) -> str | None:
        if v is None or v == "auto" or _HOST_PORT.match(v):
            return v
        raise ValueError(f"{v!r} is not 'auto' nor host:port (e.g. 127.0.0.1:6379); leave it unset for a local cluster")

    @field_validator("worker_resources", "sandbox_resources", "trainer_resources")
    @classmethod
    def _amounts(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k, n in v.items() if n < 0]
        if bad:
            raise ValueError(f"resource amounts must be >= 0 ({', '.join(bad)})")
        return v
