"""The built-in suites; importing a module registers it (see temper.envs.registry)."""

from temper.envs.suites import arithmetic, humaneval, jsonl, longctx, noisy, reasoning_gym, session, terminal, web

__all__ = ["arithmetic", "humaneval", "jsonl", "longctx", "noisy", "reasoning_gym", "session", "terminal", "web"]
