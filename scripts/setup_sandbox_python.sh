#!/usr/bin/env bash
# Build the sandbox Python (called by setup.sh): a read-only Python with pytest mounted into every sandbox
# (outside any user's venv). Built on the system python3 (its /usr is mounted in sandboxes) in a folder that
# sandbox uids can traverse (a home folder usually is not) and that is not under /tmp (sandboxes replace /tmp
# with their own, and a clone may live there): /var/cache/temper as root, else the repo's .cache/. Override the
# location with TEMPER_SANDBOX_PYTHON (temper/sandbox/layout.py looks in the same places).
# Safe to interrupt: built in place (a venv's scripts name its path, so it cannot be renamed) under an owner lock
# (temper/firsttime.py, "$SBPY.lock"), with .temper-building present until the last step; temper never uses
# a folder that has it, and the next run removes it and builds anew.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VPY=${VPY:-$ROOT/.venv/bin/python}
log() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
if [ -n "${TEMPER_SANDBOX_PYTHON:-}" ]; then SBPY=$TEMPER_SANDBOX_PYTHON
elif [ "$(id -u)" -eq 0 ]; then SBPY=/var/cache/temper/sandbox-python
else SBPY=$ROOT/.cache/sandbox-python; fi
built() { [ -x "$SBPY/bin/pytest" ] && [ ! -e "$SBPY/.temper-building" ]; }
built && exit 0
if [ "${1:-}" != --locked ]; then  # again under the lock; a killed holder's lock is taken over
    mkdir -p "$(dirname "$SBPY")"
    exec "$VPY" -m temper.firsttime "$SBPY.lock" "the sandbox Python in $SBPY" -- bash "$0" --locked
fi
[ -e "$SBPY" ] && log "removing $SBPY: an interrupted build (no completion)"
rm -rf "$SBPY"
mkdir -p "$SBPY"
touch "$SBPY/.temper-building"  # first: until it goes, the folder is not a sandbox Python
log "building the sandbox Python (pytest) in $SBPY"
/usr/bin/python3 -m venv --without-pip "$SBPY"
if [ "${TEMPER_TEST_PAUSE_AT:-}" = "the sandbox Python, half built" ]; then  # tests: killed here
    echo "temper: paused at the sandbox Python, half built (pid $$)" >&2
    sleep 3600
fi
"$VPY" -m pip --python "$SBPY/bin/python3" install -q "pytest>=8"
chmod -R a+rX "$SBPY"
rm "$SBPY/.temper-building"  # last: the folder is complete
