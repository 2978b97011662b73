"""Ring attention: one sequence's causal attention split across the ranks of a process group.

Context parallelism for sequences longer than one process holds. The sequence is cut into 2W chunks and
rank r keeps chunks r and 2W-1-r ("zigzag"): under the causal mask an early chunk has little to attend to
and a late one much, so each rank gets the same work. A rank's queries stay where they are; the key/value
blocks travel round the ring (rank r sends to r+1 and receives from r-1), one step per rank, the next
block's transfer posted before the current one is computed. Each block's partial result is merged into
the running one by log-sum-exp (flash attention's online softmax), so no rank ever holds the whole
sequence's keys or a [T, T] score matrix. The backward pass sends the blocks round again together with
their key/value gradients, which arrive back at their owner after the last step.

Only point-to-point send/recv is used: gloo on CPU, NCCL on GPU. (torch's own `context_parallel` needs
CUDA attention kernels, and SmolLM2's 9 query / 3 key-value heads rule out Ulysses' head split on 2 ranks.)
Every other op of the model is per token, so a rank runs the model on its own tokens with their global
positions (RoPE) and this backend; summing the ranks' losses and gradients gives one process's.
"""

import itertools
import math

import torch
import torch.distributed as dist

QUERY_TILE = 1024  # queries scored at once against a block: bounds the [heads, tile, block] scores


def zigzag_chunks(length: int, world: int) -> list[tuple[int, int]]:
    """[start, stop) of the sequence's 2*world chunks, in order; their sizes differ by at most one."""
    n = 2 * world
    bounds = [length * i // n for i in range(n + 1)]
    return list(itertools.pairwise(bounds))


def zigzag_positions(length: int, world: int, rank: int) -> torch.Tensor:
    """The positions of the sequence a rank holds, ascending: chunk `rank` then chunk `2*world-1-rank`."""
    chunks = zigzag_chunks(length, world)
    first, last = chunks[rank], chunks[2 * world - 1 - rank]
    return torch.cat([torch.arange(*first), torch.arange(*last)])


class RingAttention:
    """An AttentionBackend for one sequence of `length` tokens whose positions this rank holds are
    `zigzag_positions(length, world, rank)`; q [1, T_rank, Hq, D], k and v [1, T_rank, Hkv, D].
    `sliding_window` as in CausalAttention (a key at most window-1 positions back)."""

    def __init__(self, length: int, group: dist.ProcessGroup | None = None, sliding_window: int | None = None):
        self.group = group if group is not None else dist.group.WORLD
        self.world, self.rank = dist.get_world_size(self.group), dist.get_rank(self.group)
        if length < 2 * self.world:
            raise ValueError(f"ring attention: a sequence of {length} tokens cannot give 2 chunks to each of "
                             f"{self.world} ranks")
        self.positions = [zigzag_positions(length, self.world, r) for r in range(self.world)]
        self.next = dist.get_global_rank(self.group, (self.rank + 1) % self.world)
        self.prev = dist.get_global_rank(self.group, (self.rank - 1) % self.world)
        self.window = sliding_window

    def __call__(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if q.shape[0] != 1 or q.shape[1] != len(self.positions[self.rank]):
            raise ValueError(f"ring attention: expected [1, {len(self.positions[self.rank])}, heads, dim] on rank "
                             f"{self.rank}, got {list(q.shape)}")
        return _RingAttention.apply(q[0], k[0], v[0], self)[None]

    # ---- the ring ----------------------------------------------------------------------------------
    def owner(self, step: int) -> int:
        """Whose key/value block this rank holds at `step` of a pass round the ring."""
        return (self.rank - step) % self.world

    def start_pass(self, block: torch.Tensor, step: int) -> tuple[torch.Tensor, list]:
        """Send `block` (held at `step`) to the next rank; receive the one held at step + 1 from the previous.
        Returns the receive buffer and the pending requests (`finish_pass`)."""
        owner = self.owner(step + 1)
        buf = block.new_empty((block.shape[0], len(self.positions[owner]), *block.shape[2:]))
        block = block.contiguous()
        # Even ranks send first, odd ones receive first: gloo's blocking transports cannot deadlock then either.
        if self.rank % 2 == 0:
            reqs = [dist.isend(block, self.next, self.group), dist.irecv(buf, self.prev, self.group)]
        else:
            reqs = [dist.irecv(buf, self.prev, self.group), dist.isend(block, self.next, self.group)]
        return buf, reqs

    @staticmethod
    def finish_pass(pending: tuple[torch.Tensor, list]) -> torch.Tensor:
        buf, reqs = pending
        for r in reqs:
            r.wait()
        return buf

    def visible(self, qpos: torch.Tensor, kpos: torch.Tensor) -> bool:
        """Whether any query of this rank may see any key of the block (else the block is skipped)."""
        if int(kpos[0]) > int(qpos[-1]):
            return False
        return self.window is None or int(kpos[-1]) > int(qpos[0]) - self.window


def _allowed(qpos: torch.Tensor, kpos: torch.Tensor, window: int | None) -> torch.Tensor:
    allowed = kpos[None, :] <= qpos[:, None]
    if window is not None:
        allowed &= kpos[None, :] > qpos[:, None] - window
    return allowed


def _scores(q: torch.Tensor, k: torch.Tensor, qpos: torch.Tensor, kpos: torch.Tensor, window: int | None
            ) -> torch.Tensor:
    """q [tq, H, D], k [tk, H, D] -> masked scaled scores [H, tq, tk] (-inf where not allowed)."""
    s = torch.einsum("qhd,khd->hqk", q, k) * (1.0 / math.sqrt(q.shape[-1]))
    return s.masked_fill(~_allowed(qpos, kpos, window), float("-inf"))


def _heads(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Grouped-query keys/values [tk, Hkv, D] -> one per query head [tk, Hq, D] (query head h reads h // n_rep)."""
    return x.repeat_interleave(n_rep, dim=1) if n_rep > 1 else x


def _fold(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """Gradients per query head [tk, Hq, D] -> per key/value head [tk, Hkv, D]."""
    return x.view(x.shape[0], -1, n_rep, x.shape[-1]).sum(2) if n_rep > 1 else x


def _block_forward(q, k, v, qpos, kpos, window, out, lse) -> None:
    """Merge one key/value block's attention into `out` [Tq, H, D] and `lse` [H, Tq] in place."""
    for s in range(0, q.shape[0], QUERY_TILE):
        t = slice(s, s + QUERY_TILE)
        sc = _scores(q[t], k, qpos[t], kpos, window)
        b_lse = torch.logsumexp(sc, dim=-1)  # -inf on a row that sees none of the block
        p = torch.exp(sc - b_lse.masked_fill(torch.isinf(b_lse), 0.0)[..., None])
        b_out = torch.einsum("hqk,khd->qhd", p, v)
        new = torch.logaddexp(lse[:, t], b_lse)
        safe = new.masked_fill(torch.isinf(new), 0.0)
        keep, add = torch.exp(lse[:, t] - safe).T[..., None], torch.exp(b_lse - safe).T[..., None]
        out[t] = out[t] * keep + b_out * add
        lse[:, t] = new


def _block_backward(q, k, v, dout, lse, delta, qpos, kpos, window, dq) -> tuple[torch.Tensor, torch.Tensor]:
    """One block's share of the gradients: dq added in place; returns (dk, dv) per query head [tk, H, D]."""
    dk, dv = torch.zeros_like(k), torch.zeros_like(v)
    scale = 1.0 / math.sqrt(q.shape[-1])
    for s in range(0, q.shape[0], QUERY_TILE):
        t = slice(s, s + QUERY_TILE)
        p = torch.exp(_scores(q[t], k, qpos[t], kpos, window) - lse[:, t, None])  # the final softmax's weights
        dv += torch.einsum("hqk,qhd->khd", p, dout[t])
        ds = p * (torch.einsum("qhd,khd->hqk", dout[t], v) - delta[:, t, None])
        dq[t] += torch.einsum("hqk,khd->qhd", ds, k) * scale
        dk += torch.einsum("hqk,qhd->khd", ds, q[t]) * scale
    return dk, dv


class _RingAttention(torch.autograd.Function):
    """q [Tq, Hq, D], k and v [Tk, Hkv, D] of this rank -> its queries' attention output [Tq, Hq, D]. The math
    is fp32 whatever the inputs' dtype (autocast off), as flash attention accumulates."""

    @staticmethod
    def forward(ctx, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ring: RingAttention) -> torch.Tensor:
        with torch.autocast(q.device.type, enabled=False):
            qf, n_rep = q.float(), q.shape[1] // k.shape[1]
            qpos = ring.positions[ring.rank].to(q.device)
            out = torch.zeros_like(qf)
            lse = torch.full((q.shape[1], q.shape[0]), float("-inf"), device=q.device)
            kv = torch.stack([k.float(), v.float()])
            for step in range(ring.world):
                pending = ring.start_pass(kv, step) if step < ring.world - 1 else None
                kpos = ring.positions[ring.owner(step)].to(q.device)
                if ring.visible(qpos, kpos):
                    _block_forward(qf, _heads(kv[0], n_rep), _heads(kv[1], n_rep), qpos, kpos, ring.window, out,
                                   lse)
                if pending is not None:
                    kv = ring.finish_pass(pending)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.ring = ring
        return out.to(q.dtype)

    @staticmethod
    def backward(ctx, dout: torch.Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        ring: RingAttention = ctx.ring
        with torch.autocast(q.device.type, enabled=False):
            qf, dout, n_rep = q.float(), dout.float(), q.shape[1] // k.shape[1]
            qpos = ring.positions[ring.rank].to(q.device)
            delta = (dout * out).sum(-1).T  # [H, Tq]: the softmax backward's row term
            dq = torch.zeros_like(qf)
            # Each block travels with its gradient so far; after the last pass it is back at its owner.
            block = torch.stack([k.float(), v.float(), torch.zeros_like(k, dtype=torch.float32),
                                 torch.zeros_like(v, dtype=torch.float32)])
            for step in range(ring.world):
                kpos = ring.positions[ring.owner(step)].to(q.device)
                if ring.visible(qpos, kpos):
                    dk, dv = _block_backward(qf, _heads(block[0], n_rep), _heads(block[1], n_rep), dout, lse, delta,
                                             qpos, kpos, ring.window, dq)
                    block[2] += _fold(dk, n_rep)
                    block[3] += _fold(dv, n_rep)
                if ring.world > 1:
                    # the last pass carries only the gradients home
                    block = ring.finish_pass(ring.start_pass(block if step < ring.world - 1 else block[2:], step))
            dk, dv = block[-2], block[-1]  # this rank's own keys' and values' gradients, from every rank
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None
