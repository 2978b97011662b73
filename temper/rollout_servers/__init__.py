"""Rollout servers temper starts or attaches to: vLLM (`vllm_server` starts one, `vllm_client`
generates on it and pushes weights into it, `vllm_worker_extension` runs inside its workers,
`vllm_nccl_sync` sends weights over vLLM's NCCL weight transfer on GPU machines).

`vllm_worker_extension` is imported by vLLM's own interpreter (.venv-vllm): it and this file
import nothing but torch and safetensors."""
