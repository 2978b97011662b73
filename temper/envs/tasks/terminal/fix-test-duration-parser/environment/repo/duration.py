"""Parse human durations: 90s, 5m, 2h, 1h30m, 1h2m3s."""

import re

_PART = re.compile(r"(\d+)([hms])")
_UNIT = {"h": 3600, "m": 60, "s": 1}


def parse_duration(text: str) -> int:
    text = text.strip()
    m = _PART.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    return int(m.group(1)) * _UNIT[m.group(2)]
