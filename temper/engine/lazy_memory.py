"""Zeroed tensors whose pages cost nothing until they are touched."""

import math
import mmap

import numpy as np
import torch


def lazy_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros on `device`; on the CPU in an anonymous memory map: the OS maps zero pages on first touch,
    so an unused budget costs no memory (torch.zeros writes every byte, and so does calloc under
    tcmalloc, which temper's commands run on). Zeros matter: masked slots are still multiplied
    (0 * NaN = NaN). The map is unmapped when the tensor is freed."""
    if device.type != "cpu":  # device memory has no lazy zero pages to win
        return torch.zeros(shape, dtype=dtype, device=device)
    size = dtype.itemsize
    nbytes = math.prod(shape) * size
    raw = np.frombuffer(mmap.mmap(-1, max(nbytes, 1)), dtype=np.uint8, count=nbytes)
    return torch.from_numpy(raw.reshape(*shape[:-1], shape[-1] * size)).view(dtype)
