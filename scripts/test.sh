#!/usr/bin/env bash
# Set everything up (vLLM and a browser included, for the vLLM backend's and the dashboard's tests), then run the whole test suite (slow
# tests included) and lint.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-vllm --with-browser
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 RAY_AUTH_MODE=disabled
.venv/bin/ruff check .
# Two workers, each given whole test files (module fixtures such as a Ray cluster or a vLLM server start once).
exec .venv/bin/python -m pytest -q -n 2 --dist loadfile --durations=20 "$@"
