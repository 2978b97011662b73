"""`AgentConfig`: how an agent samples, how long it may go on, and how it manages its context.

One type for training, evaluation and env QA; each command's recipe (temper/config/recipes/) sets
its own values over the defaults below. A task may set its own time limits (a task folder's agent timeout); `for_task`
is the one place they meet the agent's.
"""

import shlex
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from temper.config import ConfigModel
from temper.envs.env import GRACE_S, TaskLimits


class ContextConfig(ConfigModel):
    max_observation_tokens: int = Field(1024, ge=1)  # a longer tool output keeps its head and tail
    reserve_tokens: int = Field(96, ge=0)  # always left free for the next model turn
    keep_recent_turns: int = Field(2, ge=0)  # turns kept verbatim when the window is compacted
    restate_at: float = Field(0.6, gt=0)  # restate the task once the window is this full
    summary_max_tokens: int = Field(512, ge=1)
    min_observation_tokens: int = Field(48, ge=1)  # below this room, compact instead of trimming further
    # What a full window becomes. summary: older turns become one summary, the last keep_recent_turns stay
    # verbatim. observation_masking: every older turn's own messages stay verbatim and only its tool outputs
    # become a placeholder (the oldest turns are summarised when even that does not fit).
    compaction: Literal["summary", "observation_masking"] = "summary"
    # Who writes a summary: extractive (a line per turn, no model call) or model (the policy itself, greedy;
    # its tokens count as the episode's, but are never trained on)
    summarizer: Literal["extractive", "model"] = "extractive"


class AgentConfig(ConfigModel):
    # builtin: temper's agent loop. external: `command` is run for each episode against a recording
    # OpenAI-compatible endpoint and the sandbox's exec endpoint (docs/agents.md).
    kind: Literal["builtin", "external"] = "builtin"
    command: list[str] | None = None  # the external program's argv (a string is split as a shell would)
    memory_mb: int = Field(4096, ge=64)  # the external program's address-space limit
    # An external program's request that constrains sampling (response_format, a forcing tool_choice,
    # structured_outputs): refuse: a 400 naming the field; mark: sampled under the grammar, its segment
    # flagged (info.constrained) and kept out of the loss (its logprobs are over the allowed tokens only).
    constrained_requests: Literal["refuse", "mark"] = "refuse"
    system_prompt: str | None = None  # None: the default agent prompt (temper.agent.context.SYSTEM_PROMPT)
    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_turns: int = Field(16, ge=1)
    max_turn_tokens: int = Field(1024, ge=1)  # most tokens one model turn may generate
    max_context_tokens: int = Field(8192, ge=16)  # token budget of the whole context, never exceeded
    turn_timeout_s: float = Field(300.0, gt=0)  # one model turn (and the environment's reset)
    episode_timeout_s: float = Field(1800.0, gt=0)  # the agent phase; the verifier runs after it
    tool_timeout_s: float = Field(60.0, gt=0)  # what a tool asks of its sandbox call
    tool_grace_s: float = Field(GRACE_S, ge=0)  # margin of an outer timeout over the inner one it guards
    max_answer_retries: int = Field(2, ge=0)  # a final answer in the wrong form is retried with the env's hint
    max_consecutive_errors: int = Field(3, ge=1)  # failing turns in a row before a fallback hint; 2x ends it
    context: ContextConfig = Field(default_factory=ContextConfig)

    @field_validator("command", mode="before")
    @classmethod
    def _argv(cls, v: Any) -> Any:
        return shlex.split(v) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _external_has_command(self) -> "AgentConfig":
        if self.kind == "external" and not self.command:
            raise ValueError("agent.command: an external agent needs the program to run (argv list or string)")
        return self

    def for_task(self, limits: TaskLimits) -> "AgentConfig":
        """These settings under a task's own limits: its agent timeout, when it sets one, wins."""
        if limits.agent_timeout_s is None:
            return self
        return self.model_copy(update={"episode_timeout_s": limits.agent_timeout_s})
