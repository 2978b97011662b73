#!/bin/bash
set -euo pipefail
cd /app
cat > repo/duration.py <<'EOF'
"""Parse human durations: 90s, 5m, 2h, 1h30m, 1h2m3s."""

import re

_PART = re.compile(r"(\d+)([hms])")
_WHOLE = re.compile(r"(?:\d+[hms])+")
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    text = text.strip()
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * _UNIT[u] for n, u in _PART.findall(text))
EOF
