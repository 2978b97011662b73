"""What temper reads of a Dockerfile: its instructions with their lines, and the images its stages start from.

Parsed by the `dockerfile` package (Docker's own parser, buildkit's), so continuation lines, heredocs and
parser directives read as Docker reads them. The build itself is the build tool's (builder.py).
"""

import re
from dataclasses import dataclass
from pathlib import Path

import dockerfile

from temper.errors import TemperError


class DockerfileError(TemperError):
    pass


@dataclass(frozen=True)
class Instruction:
    cmd: str  # upper case: FROM, RUN, ...
    line: int  # first line, 1-based
    end: int  # last line (continuations)
    text: str  # as written (continuations joined)
    value: tuple[str, ...]


def parse(path: Path, where: str) -> list[Instruction]:
    """`where` names the task for the error line (a file that Docker's parser refuses)."""
    try:
        cmds = dockerfile.parse_file(str(path))
    except (dockerfile.GoParseError, OSError, UnicodeDecodeError) as exc:
        raise DockerfileError(f"{where}: {path.name} cannot be parsed: {exc}") from None
    return [Instruction(c.cmd.upper(), c.start_line, c.end_line, c.original, tuple(c.value)) for c in cmds]


_VAR = re.compile(r"\$(?:\{(\w+)(?::-([^}]*))?\}|(\w+))")


def base_images(instructions: list[Instruction]) -> list[tuple[Instruction, str]]:
    """Each FROM that names an image (not an earlier stage, not `scratch`), with ARG defaults given
    before the first FROM substituted, as the build tool will read it."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    out: list[tuple[Instruction, str]] = []
    seen_from = False
    for ins in instructions:
        if ins.cmd == "ARG" and not seen_from:
            for item in ins.value:
                name, _, default = item.partition("=")
                args[name] = default.strip("\"'")
        if ins.cmd != "FROM" or not ins.value:
            continue
        seen_from = True
        words = [w for w in ins.value if not w.startswith("--")]  # --platform=...
        name = _VAR.sub(lambda m: args.get(m.group(1) or m.group(3)) or m.group(2) or "", words[0])  # ${X:-dflt}
        if len(words) >= 3 and words[1].upper() == "AS":
            stages.add(words[2].lower())
        if name.lower() not in stages and name != "scratch":
            out.append((ins, name))
    return out


def step_line(instructions: list[Instruction], step: int) -> Instruction | None:
    """The instruction of a build tool's `STEP n/m` (counted over every instruction but the ARGs before the
    first FROM, as podman and buildah count)."""
    first = next((i for i, ins in enumerate(instructions) if ins.cmd == "FROM"), 0)
    steps = instructions[first:]
    return steps[step - 1] if 1 <= step <= len(steps) else None


def rewrite_from(ins: Instruction, image: str) -> str:
    """The FROM line with its image replaced by `image` (flags and `AS stage` kept)."""
    flags = [w for w in ins.value if w.startswith("--")]
    rest = [w for w in ins.value if not w.startswith("--")]
    stage = f" AS {rest[2]}" if len(rest) >= 3 and rest[1].upper() == "AS" else ""
    return " ".join(["FROM", *flags, image]) + stage + "\n"
