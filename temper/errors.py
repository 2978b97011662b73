"""User-facing errors.

A `TemperError` is a problem with the user's input (a file, a field, a model name, a
request). The CLI prints its message as one line and exits non-zero, without a traceback.
Anything else that escapes is a bug in temper and keeps its traceback.
"""


class TemperError(Exception):
    """An error caused by the user's input; its message names the file, field or item at fault."""

    exit_code = 1


class ConfigError(TemperError):
    """A configuration that does not validate. One problem per line in `problems`."""

    exit_code = 2

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))
