"""The verdicts a task can get, and how a task's checks turn into its verdict list."""

from typing import Any

BAD = ("broken", "flaky", "trivial-verifier", "hackable", "too-slow", "duplicate", "contaminated", "sensitive-data")
STRATA = ("too-easy", "learnable", "too-hard")
VERDICTS = ("ok", *BAD, *STRATA)


def assemble(record: dict[str, Any]) -> list[str]:
    """Verdicts from a task record's checks: its problems (waived ones dropped), else `ok`; plus the
    difficulty stratum when the policy ran."""
    checks = record.get("checks", {})
    found: list[str] = []
    if record.get("load_error"):
        found.append("broken")
    oracle = checks.get("oracle") or {}
    if oracle.get("verdict") in ("broken", "flaky"):
        found.append(oracle["verdict"])
    if (checks.get("resources") or {}).get("too_slow"):
        found.append("too-slow")
    controls = checks.get("controls") or {}
    if controls.get("trivial"):
        found.append("trivial-verifier")
    if controls.get("hackable"):
        found.append("hackable")
    if (checks.get("duplicates") or {}).get("duplicate_of"):
        found.append("duplicate")
    if (checks.get("contamination") or {}).get("overlaps"):
        found.append("contaminated")
    if (checks.get("sensitive") or {}).get("findings"):
        found.append("sensitive-data")
    waived = set(record.get("waived", []))
    verdicts = [v for v in dict.fromkeys(found) if v not in waived] or ["ok"]
    if stratum := (checks.get("policy") or {}).get("stratum"):
        verdicts.append(stratum)
    return verdicts
