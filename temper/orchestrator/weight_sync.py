"""Getting new weights to the rollout engines, tagged with their policy version.

In one process it is a tensor copy into the engine's model (between two engine steps; sequences
in flight continue under the new version when partial rollouts are on). Across processes the
state dict goes into the Ray object store once and every actor copies it from there.
"""

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import torch


async def publish_local(workers: Sequence[Any], state: Mapping[str, torch.Tensor], version: int) -> None:
    for w in workers:
        await w.load_weights(state, version)


async def publish_ray(actors: Sequence[Any], state: Mapping[str, torch.Tensor], version: int) -> None:
    import ray

    ref = ray.put(dict(state))  # one copy in the object store, read by every actor
    await asyncio.gather(*(a.load_weights.remote(ref, version) for a in actors))
