#!/usr/bin/env bash
# On a CUDA machine: the GPU paths end to end in a few minutes (engine greedy parity GPU vs CPU on
# SmolLM2, a bf16 training step, the rollout benchmark's section 1 at small size); last line JSON.
# Sets up .venv first when it is missing. On a machine without CUDA it says so and exits 2.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
exec .venv/bin/python scripts/gpu_check.py "$@"
