"""temper: post-training language-model agents with reinforcement learning."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("temper")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+local"
