"""Typed configuration: YAML + dotted overrides, every problem reported with file and field."""

from pathlib import Path

import pytest

from temper.config import ConfigModel, apply_overrides, load_config
from temper.errors import ConfigError


class Sampling(ConfigModel):
    temperature: float = 1.0
    max_tokens: int = 16


class Example(ConfigModel):
    name: str = "x"
    sampling: Sampling = Sampling()


def test_defaults_need_no_file():
    cfg = load_config(Example)
    assert cfg.sampling.max_tokens == 16


def test_yaml_then_overrides(tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text("name: a\nsampling:\n  temperature: 0.5\n")
    cfg = load_config(Example, f, ["sampling.max_tokens=32", "name=b"])
    assert (cfg.name, cfg.sampling.temperature, cfg.sampling.max_tokens) == ("b", 0.5, 32)


def test_every_problem_named_with_file_and_field(tmp_path: Path):
    f = tmp_path / "bad.yaml"
    f.write_text("nmae: a\nsampling:\n  temperature: hot\n  max_tokens: [1]\n")
    with pytest.raises(ConfigError) as info:
        load_config(Example, f)
    problems = info.value.problems
    assert len(problems) == 3
    assert any("nmae: unknown field" in p for p in problems)
    assert any("sampling.temperature" in p and "hot" in p for p in problems)
    assert all(p.startswith(str(f)) for p in problems)


def test_missing_file_and_bad_yaml(tmp_path: Path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(Example, tmp_path / "nope.yaml")
    f = tmp_path / "broken.yaml"
    f.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml:\d+"):
        load_config(Example, f)


def test_override_into_a_value_is_refused():
    with pytest.raises(ConfigError, match="name is a value"):
        apply_overrides({"name": "x"}, ["name.inner=1"])
    with pytest.raises(ConfigError, match=r"dotted\.key=value"):
        apply_overrides({}, ["novalue"])
