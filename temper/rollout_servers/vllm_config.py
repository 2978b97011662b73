"""`orchestrator.vllm`: the vLLM servers rollouts generate on, started by temper (managed) or given by URL
(attached). The YAML keys are documented in docs/rollout_servers.md."""

from typing import Literal

from pydantic import Field

from temper.config import ConfigModel


class VllmConfig(ConfigModel):
    urls: list[str] = Field(default_factory=list)  # attach to these servers; empty: start num_servers ourselves
    num_servers: int = Field(1, ge=1)  # managed servers (each gets its own share of the CPU cores)
    served_model_name: str = "temper-policy"  # the model name managed servers answer to
    model: str | None = None  # attached servers' model name (None: ask the server's /v1/models)
    python: str | None = None  # vLLM's interpreter; default: .venv-vllm/bin/python beside temper's checkout
    dtype: str | None = None  # None: the trainer's parameter dtype ("float32", "bfloat16", ...)
    max_model_len: int | None = None  # None: the model's own limit
    enforce_eager: bool = True  # no graph capture/compile: starts in ~20 s instead of ~60 s, ~10% slower
    kv_cache_gb: int = Field(2, ge=1)  # CPU: VLLM_CPU_KVCACHE_SPACE per server (vLLM reads whole GiB)
    gpu_memory_utilization: float = Field(0.5, gt=0, le=1)  # GPU: vLLM's share of each device
    extra_args: list[str] = Field(default_factory=list)  # appended to every managed server's command line
    # filesystem: safetensors written once, loaded by each server; nccl: vLLM's NCCL weight transfer (GPU only)
    weight_sync: Literal["filesystem", "nccl"] = "filesystem"
    tensor_parallel_size: int = Field(1, ge=1)  # GPU workers per server (managed: --tensor-parallel-size)
    nccl_master_address: str = "127.0.0.1"  # nccl: this trainer's address as the servers' workers reach it
    weights_dir: str | None = None  # where pushed weights go (shared by trainer and servers); default RUN/vllm/weights
    startup_timeout_s: float = Field(600.0, gt=0)
    request_timeout_s: float = Field(600.0, gt=0)
    health_timeout_s: float = Field(5.0, gt=0)  # a /health answer later than this is a miss
    health_interval_s: float = Field(5.0, gt=0)  # each live server's /health is checked this often; two misses: down
