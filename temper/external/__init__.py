"""External agent programs: an episode runs the user's own harness against a recording
OpenAI-compatible endpoint and the task's sandbox (docs/agents.md).

`temper.agent.runner.run_episode` hands `agent.kind: external` episodes to
`external_episode.run_external_episode`. This package sits above `agent` and uses `serve`'s pure
request modules (schemas, chat rendering, constraints), never its engine.
"""
