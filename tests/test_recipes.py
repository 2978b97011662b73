"""Recipes are data: `temper <command> --print-config --set X=V` differs from `--print-config` in X alone,
for every leaf field; giving one field of a section never resets the section's other recipe values."""

import re
import typing
from typing import Any

import pytest
import yaml
from pydantic import BaseModel
from typer.testing import CliRunner

from temper.cli.main import app
from temper.config import read_recipe
from temper.errors import ConfigError, TemperError
from temper.evals.config import EvalConfig
from temper.orchestrator.config import TrainConfig
from temper.rl.config import SFTConfig
from temper.serve.config import ServeConfig

COMMANDS = ["train", "sft", "serve", "eval", "envqa", "generate"]
# Values derived from another field by design (documented on the field), not copied knobs.
DERIVED = {("eval", "samples"): {"agent.temperature"}}
# Fields no other value of which stands alone: each is refused with one line (its reason here).
REFUSED_ALONE = {
    "agent.kind": "external needs agent.command too",
    "trainer.world_size": "temper sft trains in one process (FSDP2 ranks are temper train's)",
    "trainer.context_parallel": "it must divide trainer.world_size (1 by default): set with it",
    "algorithm.trainer.context_parallel": "it must divide algorithm.trainer.world_size (1 by default): set with it",
    "engine.speculative.method": "temper serve's fast variant is n-gram speculation",
}


def printed(command: str, *sets: str) -> dict[str, Any] | None:
    """The resolved config `temper COMMAND --print-config --set ...` prints; None when it is refused."""
    args = [command, "--print-config"] + [a for s in sets for a in ("--set", s)]
    result = CliRunner().invoke(app, args)
    if isinstance(result.exception, TemperError):  # refused: main() prints it as one line, exit 2
        return None
    assert result.exit_code == 0, (args, result.output, result.exception)
    return yaml.safe_load(result.output)


def leaves(node: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted path -> value of every leaf (lists are leaves: --set replaces them whole)."""
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            out.update(leaves(value, f"{prefix}{key}."))
        return out
    return {prefix[:-1]: node}


def annotation(model: type[BaseModel], path: str) -> Any:
    """The type annotation of a dotted field of `model` (through nested sections and dicts of sections)."""
    ann: Any = model
    for part in path.split("."):
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            ann = ann.model_fields[part].annotation
        else:  # dict[str, Section]
            ann = typing.get_args(ann)[1]
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) in (typing.Union, __import__("types").UnionType) and len(args) == 1:
            ann = args[0]
    return ann


def candidates(value: Any, ann: Any) -> list[Any]:
    """Other values of the field's type, most plausible first."""
    if typing.get_origin(ann) is typing.Literal:
        return [c for c in typing.get_args(ann) if c != value]
    if isinstance(value, bool) or ann is bool:
        return [not value]
    if isinstance(value, int) or ann is int:
        v = value or 0
        return [v + 1, v * 2 + 2, max(v - 1, 0), 1]
    if isinstance(value, float) or ann is float:
        v = value or 0.0
        return [v / 2 if v else 0.5, v * 1.5 if v else 0.25, v + 0.1, 0.9]
    if isinstance(value, list):
        return [value + value[-1:], value[:-1], list(reversed(value)), ["x"]]
    if value is None and typing.get_origin(ann) is list:
        return [["x"]]
    if value is None and typing.get_origin(ann) is dict:
        return [{}]
    text = str(value or "")
    digits = [m for m in re.finditer(r"\d+", text)]
    bumped = [text[:d.start()] + str(int(d.group()) + 1) + text[d.end():] for d in digits[-1:]]
    # a few values that string fields with a vocabulary of their own take (runtime.device, ray.address, ...)
    return [*bumped, f"{text}-other" if text else "other", "fast", "standard", "cpu", "auto", "127.0.0.1:6379"]


CONFIG_CLASSES = {"train": TrainConfig, "sft": SFTConfig, "serve": ServeConfig, "eval": EvalConfig}


def config_class(command: str) -> type[BaseModel]:
    if command in CONFIG_CLASSES:
        return CONFIG_CLASSES[command]
    from temper.cli.generate import GenerateConfig
    from temper.envqa.config import EnvQAConfig

    return {"envqa": EnvQAConfig, "generate": GenerateConfig}[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_leaf_field_overrides_alone(command: str) -> None:
    base = printed(command)
    assert base is not None
    flat, cls = leaves(base), config_class(command)
    lonely = []
    for path, value in flat.items():
        for other in candidates(value, annotation(cls, path)):
            text = yaml.safe_dump(other, default_flow_style=True, width=10**6).removesuffix("...\n").strip()
            got = printed(command, f"{path}={text}")
            if got is None:
                continue  # refused with one line (a value this field does not take): try another
            changed = {k for k, v in leaves(got).items() if flat.get(k) != v} | (set(flat) - set(leaves(got)))
            if changed:
                assert changed == {path} | DERIVED.get((command, path), set()), (path, other, changed)
                break
        else:
            if path not in REFUSED_ALONE:
                lonely.append(path)
    assert not lonely, f"no other value accepted for {lonely}"
    assert len(flat) >= 10


def test_one_field_keeps_the_sections_recipe_values() -> None:
    """The trap this design removes: --set of one field rebuilt its section from class defaults."""
    base, kl = printed("train"), printed("train", "algorithm.loss.kl_coef=0.05")
    assert kl is not None and base is not None
    assert kl["algorithm"]["optim"] == base["algorithm"]["optim"] == {**base["algorithm"]["optim"], "lr": 3e-5,
                                                                       "total_steps": 40, "min_lr_ratio": 1.0}
    assert kl["algorithm"]["checkpoint"]["keep_best"] is False
    seqs = printed("train", "engine.max_num_seqs=64")
    assert seqs is not None and seqs["engine"]["kv_budget_bytes"] == base["engine"]["kv_budget_bytes"] == 512 * 2**20
    served = printed("serve", "engine.kv_budget_bytes=1000000")
    assert served is not None and served["engine"]["speculative"]["method"] == "ngram"
    assert served["engine"]["speculative"]["ngram_min"] == 1


def test_recipes_hold_only_values_that_differ_from_the_classes() -> None:
    """A recipe value equal to its class default is noise that would hide a changed default."""
    for command, cls in CONFIG_CLASSES.items():
        recipe, plain = leaves(read_recipe(cls.recipe)), leaves(cls.model_construct().model_dump(mode="json"))
        same = {k for k, v in recipe.items() if plain.get(k) == v}
        assert not same, (command, same)


def test_best_metric_is_one_the_command_writes() -> None:
    assert printed("train", "algorithm.checkpoint.keep_best=true") is not None  # the recipe's metric: pass_rate
    with pytest.raises(ConfigError, match=r"best_metric 'reward_mean'.*pass_rate"):
        from temper.config import load_config

        load_config(TrainConfig, None, ["algorithm.checkpoint.keep_best=true",
                                        "algorithm.checkpoint.best_metric=reward_mean"])
    with pytest.raises(ConfigError, match="best_metric 'pass_rate'"):
        from temper.config import load_config

        load_config(SFTConfig, None, ["checkpoint.keep_best=true", "checkpoint.best_metric=pass_rate"])


def test_eval_temperature_is_the_agents_and_derived_from_samples_when_unset() -> None:
    assert EvalConfig.from_recipe().agent.temperature == 0.0
    assert EvalConfig.from_recipe({"samples": 4}).agent.temperature == 0.8
    assert EvalConfig.from_recipe({"samples": 4, "agent": {"temperature": 0.3}}).agent.temperature == 0.3
    out = printed("eval", "agent.temperature=0.6")
    assert out is not None and out["agent"]["temperature"] == 0.6 and "sampling" not in out


def test_flags_are_values_not_yaml() -> None:
    """A text flag stays a string however YAML would read it (`yes`, `[1, 2]`)."""
    result = CliRunner().invoke(app, ["generate", "--print-config", "--prompt", "yes", "--model", "[1, 2]"])
    assert result.exit_code == 0, result.output
    got = yaml.safe_load(result.output)
    assert (got["prompt"], got["model"]) == ("yes", "[1, 2]")


def test_a_bad_override_is_one_line_and_exit_2(tmp_path) -> None:
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "temper", "train", "--print-config", "--set", "algorithm.optim.lr=fast"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "config error: --set: algorithm.optim.lr: Input should be a valid number, unable to parse string as a number "
        "(got 'fast')"]


def test_no_section_is_built_with_values_of_its_parent() -> None:
    """A parent's default for a child section is the child's own defaults: pydantic rebuilds the child from its
    class as soon as one of its fields is given, so any value a parent put there would silently vanish."""
    from temper.cli.generate import GenerateConfig
    from temper.envqa.config import EnvQAConfig
    from temper.sandbox.config import SandboxConfig

    seen: set[type] = set()
    todo: list[type[BaseModel]] = [*CONFIG_CLASSES.values(), EnvQAConfig, GenerateConfig, SandboxConfig]
    bad = []
    while todo:
        cls = todo.pop()
        if cls in seen:
            continue
        seen.add(cls)
        for name, field in cls.model_fields.items():
            default = field.get_default(call_default_factory=True)
            if isinstance(default, BaseModel):
                todo.append(type(default))
                if default != type(default)():
                    bad.append(f"{cls.__name__}.{name}")
    assert len(seen) > 20 and not bad, bad
