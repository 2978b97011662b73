"""int4 keys: exact (fp32) while their block fills, quantized per channel over the block once it is full."""

import torch

from temper.engine.kv_cache import (
    KVCache,
    dequantize_int4,
    dequantize_int4_channels,
    int4_groups,
    quantize_int4,
    quantize_int4_channels,
)
from temper.models import ModelConfig

CFG = ModelConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16)
BS = 8


def _cache(num_blocks: int = 6) -> KVCache:
    return KVCache(CFG, num_blocks=num_blocks, block_size=BS, kv_dtype="int4")


def _write(cache: KVCache, block: int, offsets: list[int], keys: torch.Tensor) -> None:
    """One step: every layer writes the same rows (keys [N, Hkv, D], layer l's scaled by l + 1; values -keys)."""
    blocks, offs = torch.full((len(offsets),), block), torch.tensor(offsets)
    cache.plan_writes(blocks.tolist(), offsets)  # as the model runner does before the forward
    for layer in range(CFG.num_hidden_layers):
        cache.write(layer, blocks, offs, keys * (layer + 1), -keys * (layer + 1))


def _gathered(cache: KVCache, block: int, layer: int = 0, which: str = "k") -> torch.Tensor:
    """The block's keys (or values) as attention reads them, un-rotated: [block_size, Hkv, D]."""
    return (cache.gather(layer, which, torch.tensor([block]))[:, 0] @ cache.rotation).transpose(0, 1)


def test_a_filling_block_reads_exact_keys_and_a_full_one_its_per_channel_quantization():
    torch.manual_seed(0)
    cache, keys = _cache(), torch.randn(BS, CFG.num_key_value_heads, CFG.head_dim) * 3
    for t in range(BS - 1):  # one token a step, as decoding writes
        _write(cache, 2, [t], keys[t:t + 1])
        assert torch.allclose(_gathered(cache, 2)[:t + 1], keys[:t + 1], atol=1e-5)
        assert torch.allclose(_gathered(cache, 2, layer=1)[:t + 1], 2 * keys[:t + 1], atol=1e-5)
        assert torch.allclose(_gathered(cache, 2, which="v")[:t + 1], -keys[:t + 1], atol=1e-5)
    read = cache.read(0, "k", torch.tensor([2, 2]), torch.tensor([0, 5]))  # the decode buffer's reads agree
    assert torch.allclose(read, (keys[[0, 5]] @ cache.rotation).transpose(0, 1), atol=1e-5)
    _write(cache, 2, [BS - 1], keys[BS - 1:])  # the block is full: its keys are quantized now
    rotated = (keys @ cache.rotation).transpose(0, 1)  # [Hkv, bs, D]
    expect = dequantize_int4_channels(*quantize_int4_channels(rotated))
    got = cache.gather(0, "k", torch.tensor([2]))[:, 0]
    assert torch.equal(got, expect) and not torch.allclose(got, rotated, atol=1e-3)
    assert torch.equal(cache.read(0, "k", torch.tensor([2]), torch.tensor([3]))[:, 0], expect[:, 3])
    values = dequantize_int4(*quantize_int4(-rotated, int4_groups(CFG.head_dim)))  # per token, as written
    assert torch.equal(cache.gather(0, "v", torch.tensor([2]))[:, 0], values)
    # per channel over the block beats per token over groups on the same keys
    tokens, scales = quantize_int4(rotated, 1)
    assert (expect - rotated).pow(2).mean() < (dequantize_int4(tokens, scales) - rotated).pow(2).mean()


def test_a_block_written_again_after_it_filled_reopens_with_its_exact_rows():
    """A speculative draft fills a block and is rejected: the next write to that block finds its fp32 rows."""
    torch.manual_seed(1)
    cache, keys = _cache(), torch.randn(BS, CFG.num_key_value_heads, CFG.head_dim)
    _write(cache, 4, list(range(BS)), keys)  # full: closed
    redo = torch.randn(2, CFG.num_key_value_heads, CFG.head_dim)
    _write(cache, 4, [BS - 3, BS - 2], redo)  # the rejected tail written again
    assert cache.open.reopened == 1
    got = _gathered(cache, 4)
    assert torch.allclose(got[:BS - 3], keys[:BS - 3], atol=1e-5)  # exact again, not the quantized rows
    assert torch.allclose(got[BS - 3:BS - 1], redo, atol=1e-5)


def test_a_full_pool_closes_its_least_recent_open_block_and_a_copy_opens_with_the_same_rows():
    torch.manual_seed(2)
    cache = _cache(num_blocks=64)
    slots = cache.open.rows.shape[3]
    keys = torch.randn(3, CFG.num_key_value_heads, CFG.head_dim)
    _write(cache, 0, [0, 1, 2], keys)  # block 0 stays partial: a sequence that finished or waits
    for b in range(1, slots + 1):  # every slot taken by blocks written later
        _write(cache, b, [0], keys[:1])
    assert cache.open.forced == 1 and 0 not in cache.open.open  # block 0 closed to free its slot
    got = _gathered(cache, 0)[:3]
    assert not torch.allclose(got, keys, atol=1e-5) and (got - keys).norm() / keys.norm() < 0.2  # quantized
    cache.copy_block(1, 63)  # a forked partial block: the copy is open with the same exact rows
    assert torch.allclose(_gathered(cache, 63)[:1], keys[:1], atol=1e-5)
    _write(cache, 0, [3], keys[:1])  # block 0 written again: reopened from what the cache holds
    assert torch.allclose(_gathered(cache, 0)[:3], got, atol=1e-5)
    grown = cache.open.rows.shape[3]
    _write(cache, 40, list(range(BS)), torch.randn(BS, CFG.num_key_value_heads, CFG.head_dim))
    assert cache.open.rows.shape[3] == grown  # a full block in one step reuses a slot, grows nothing


def test_a_block_copied_over_a_freed_open_block_reads_the_copy_not_the_old_rows():
    """A finished sequence's partial last block stays open here (the cache is not told of frees); when a fork
    copies a full block into that block id, reads must give the copy."""
    torch.manual_seed(3)
    cache = _cache()
    stale, full = torch.randn(2, CFG.num_key_value_heads, CFG.head_dim), torch.randn(BS, CFG.num_key_value_heads,
                                                                                     CFG.head_dim)
    _write(cache, 1, [0, 1], stale)  # block 1: open, then its sequence finishes
    _write(cache, 2, list(range(BS)), full)  # block 2: full, closed
    cache.copy_block(2, 1)
    assert 1 not in cache.open.open
    assert torch.equal(cache.gather(0, "k", torch.tensor([1])), cache.gather(0, "k", torch.tensor([2])))
    assert torch.equal(cache.gather(0, "v", torch.tensor([1])), cache.gather(0, "v", torch.tensor([2])))
