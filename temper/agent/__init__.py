"""The agent: tools, tool-call parsing, context management and the token-in/token-out loop."""

from temper.agent.config import AgentConfig, ContextConfig
from temper.agent.context import ContextManager, TurnNote, extractive_summary
from temper.agent.episode import EpisodeResult, TurnRecord
from temper.agent.loop import AgentLoop
from temper.agent.runner import run_builtin_episode, sample_seed
from temper.agent.toolcall import ToolCall, parse_tool_calls
from temper.agent.tools import BUILTIN, Tool, ToolContext, ToolError, tool

__all__ = [
    "BUILTIN", "AgentConfig", "AgentLoop", "ContextConfig", "ContextManager", "EpisodeResult", "Tool", "ToolCall",
    "ToolContext", "ToolError", "TurnNote", "TurnRecord", "extractive_summary", "parse_tool_calls",
    "run_builtin_episode", "sample_seed", "tool",
]
