"""External agent programs: an episode runs the user's own harness against a recording
OpenAI-compatible endpoint and the task's sandbox (docs/agents.md).

`temper.agent.runner.run_episode` hands `agent.kind: external` episodes to
`external_episode.run_external_episode`. This package sits above `agent`; its endpoint is `serve`'s
OpenAI-compatible route layer (temper/serve/layer.py) over the run's client, never serve's engine.
"""
