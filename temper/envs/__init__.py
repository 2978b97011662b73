"""Environments: tasks, suites by spec, verifiers, and the task folder format."""

from temper.envs.env import Environment, Observation, SingleTurnEnv, StepResult, TaskLimits
from temper.envs.registry import parse_spec, register_suite, suite_names
from temper.envs.reward import Reward
from temper.envs.sandboxes import SandboxProvider, make_pool
from temper.envs.suite import ListSuite, Suite
from temper.envs.task import Task

__all__ = [
    "Environment", "ListSuite", "Observation", "Reward", "SandboxProvider", "SingleTurnEnv", "StepResult", "Suite",
    "Task", "TaskLimits", "make_pool", "parse_spec", "register_suite", "suite_names",
]
