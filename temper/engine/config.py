"""Engine settings: one pydantic section with defaults that run on a 2-core CPU."""

from typing import Literal

from pydantic import Field

from temper.config import ConfigModel
from temper.models.fused_linear import PackChoice
from temper.native import Choice as NativeChoice


class SpeculativeConfig(ConfigModel):
    # "ngram": prompt lookup (no draft model), "draft": a small draft model, None: off.
    method: Literal["ngram", "draft"] | None = None
    num_tokens: int = Field(16, ge=1, le=32)  # most tokens proposed per step
    # Adapt each sequence's draft length to its acceptance: +2 after a fully accepted draft, -1
    # after a rejection (between 1 and num_tokens). Verifying k drafts costs a forward of k + 1
    # tokens, ~2x a decode step at k = 10 on CPU (small-M matmuls), so unaccepted drafts are not free.
    adaptive: bool = True
    initial_tokens: int = Field(2, ge=1)  # the first draft length of a sequence when adaptive
    ngram_max: int = Field(4, ge=1)
    ngram_min: int = Field(2, ge=1)
    # method="draft": the draft is `draft_model` (a name or path; LLMEngine(draft_model=...) takes a built
    # model), cut to its first `draft_layers` layers if set; with no draft_model, the target's first
    # `draft_layers` layers (layer-skip self-speculation: shares every weight, so weight updates reach it).
    draft_model: str | None = None
    draft_layers: int | None = Field(None, ge=1)


class EngineConfig(ConfigModel):
    # KV cache budget in bytes; the number of blocks follows from it, the dtype and the model.
    kv_budget_bytes: int = Field(2 * 1024**3, gt=0)
    # Large blocks: a block-table gather is one memcpy per block (block 16 cost ~5x a contiguous decode).
    # 64 keeps prefix sharing fine-grained enough for ~200-token system prompts.
    block_size: int = Field(64, ge=1)
    # int8 and int4 store Hadamard-rotated keys and values (kv_cache.py): int8 with per-token scales, int4 with
    # per-token scales for values and per-channel ones over each full block for keys (a block's keys stay fp32
    # until it is full); 1/3.8 and 1/7.1 of fp32's bytes on SmolLM2's heads
    kv_dtype: Literal["fp32", "bf16", "int8", "int4"] = "fp32"
    max_num_seqs: int = Field(128, ge=1)  # sequences in the running batch
    max_num_batched_tokens: int = Field(1024, ge=1)  # per-step token budget (decode + prefill chunks)
    chunked_prefill: bool = True  # off: a prompt is prefilled whole in one step
    prefix_caching: bool = True
    # Decode rows sharing cached prefix blocks (n samples of a prompt) attend to them once per group.
    cascade_attention: bool = True
    # Those shared prefixes, gathered out of the paged cache, are kept (per layer, fp32) and reused by
    # the next steps while the groups and their blocks stay the same, within this many bytes; 0 = off
    # (gathered again every layer and step: at 8 groups of ~300 shared tokens, ~110 MB a step copied).
    cascade_prefix_bytes: int = Field(512 * 1024**2, ge=0)
    # Decoding rows keep their own keys/values contiguous across steps (see decode_buffer.py)
    # within this many bytes (and never more than the KV cache's), instead of gathering them from
    # the paged cache every step; 0 = off.
    decode_buffer_bytes: int = Field(2 * 1024**3, ge=0)
    # fp32 on CPU: the linear layers and the head run on a GEMM library's prepacked weights (one more copy
    # of the weights, repacked after a weight load): "onednn" (1.4-2.2x MKL on AMD EPYC), "mkl" (MKL's
    # packed SGEMM), "auto" (mkl on Intel CPUs, onednn elsewhere), "off" (F.linear). See fused_linear.py.
    packed_weights: PackChoice = "auto"
    # temper's C++ kernels on the CPU (temper/native: decode attention over an fp32 cache, GEMMs of 1-8
    # rows), built once per machine: "auto" where they build, torch ops otherwise (said once in the log);
    # "on" an error where they cannot be built; "off" torch ops. Where a kernel does not apply (an int8
    # cache, a head_dim other than 16/32/64/128) torch ops run either way.
    native_kernels: NativeChoice = "auto"
    max_model_len: int | None = None  # default: the model's max_position_embeddings
    # Attention over the cache for long prompts runs in query chunks of this many tokens, so
    # no [T, T] score matrix is ever materialised.
    attention_chunk: int = Field(512, ge=16)
    # Sliding window with attention sinks for contexts beyond the trained length (0 = off).
    sliding_window: int = Field(0, ge=0)
    sink_tokens: int = Field(4, ge=0)
    speculative: SpeculativeConfig = SpeculativeConfig()
    seed: int = 0  # seeds requests that carry no seed of their own
