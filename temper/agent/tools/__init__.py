"""Tools the agent calls: built-ins acting on the episode's sandbox, and users' typed functions."""

from temper.agent.tools.base import Tool, ToolContext, ToolError, tool
from temper.agent.tools.builtin import BUILTIN

__all__ = ["BUILTIN", "Tool", "ToolContext", "ToolError", "tool"]
