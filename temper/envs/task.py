"""A task: one prompt or instruction with everything needed to score an answer to it.

Ids are content hashes, so the same task gets the same id in every run and every process
(env QA dedups and tracks tasks by id). `payload` is what the suite's verifier needs and is
never shown to the agent; `prompt` is what the agent sees (the `noisy` suite corrupts only it).
"""

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any


def content_hash(*parts: Any) -> str:
    """Stable 16-hex-digit hash of JSON-able parts (dict key order does not matter)."""
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Task:
    id: str
    suite: str
    domain: str
    prompt: str
    tags: tuple[str, ...] = ()
    difficulty: str | float | None = None
    payload: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)
    # The reference solution in the suite's own form: an answer text for single-turn suites,
    # a shell script for terminal tasks. Run it with `Suite.run_oracle(task)`.
    oracle: str | None = None

    @classmethod
    def make(cls, suite: str, domain: str, prompt: str, payload: dict[str, Any] | None = None, **kw: Any) -> "Task":
        payload = payload or {}
        return cls(id=content_hash(domain, prompt, payload), suite=suite, domain=domain, prompt=prompt,
                   payload=payload, **kw)

    def with_prompt(self, prompt: str, **kw: Any) -> "Task":
        """A copy shown with another prompt (same payload and verifier); a new content id."""
        return replace(self, id=content_hash(self.domain, prompt, self.payload), prompt=prompt, **kw)

    def content(self) -> str:
        """Everything the agent could see, as text: for dedup and contamination checks."""
        files = self.payload.get("files") or {}
        return "\n".join([self.prompt, *(f"--- {p}\n{t}" for p, t in sorted(files.items()))])
