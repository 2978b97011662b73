"""Suite specs: names, typed arguments, nesting, user import paths, one-line errors."""

import pytest

from temper.envs import registry
from temper.envs.registry import parse_spec, split_args
from temper.envs.suite import ListSuite
from temper.envs.task import Task
from temper.errors import TemperError


def test_split_args_keeps_nested_specs_and_import_paths() -> None:
    args = split_args("suite=(reasoning_gym:task=countdown,n=5),rate=0.05,reward=pkg.mod:fn", "s")
    assert args == {"suite": "reasoning_gym:task=countdown,n=5", "rate": "0.05", "reward": "pkg.mod:fn"}


def test_arguments_are_typed_by_the_factory_signature() -> None:
    s = parse_spec("longctx:task=niah,length=300,depth=0.25,n=3,haystack=generated")
    assert (s.length, s.depth, s.n, s.haystack) == (300, 0.25, 3, "generated")
    assert s.spec == "longctx:task=niah,length=300,depth=0.25,n=3,haystack=generated"
    assert len(s) == 3


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("nosuch", "unknown suite 'nosuch'"),
        ("longctx:bogus=1", "takes no argument 'bogus'"),
        ("longctx:n=abc", "n='abc' is not a valid int"),
        ("longctx:n", "'n' is not key=value"),
        ("reasoning_gym", "needs task=..."),
        ("noisy:suite=(longctx:n=2,rate=0.1", "unbalanced parentheses"),
        ("no_such_module_xyz:make", "cannot import no_such_module_xyz"),
    ],
)
def test_bad_specs_give_one_line_errors(spec: str, fragment: str) -> None:
    with pytest.raises(TemperError) as exc:
        parse_spec(spec)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_a_user_suite_by_import_path_and_by_registration(tmp_path, monkeypatch) -> None:
    (tmp_path / "my_envs.py").write_text(
        "from temper.envs.suite import ListSuite\n"
        "from temper.envs.suites.jsonl import JsonlEnv\n"
        "from temper.envs.task import Task\n"
        "class Echo(ListSuite):\n"
        "    name = 'echo'\n"
        "    def __init__(self, n: int = 2):\n"
        "        super().__init__(); self.n = n\n"
        "    def build(self):\n"
        "        return [Task.make('echo', 'toy', f'say {i}', {'example': {'i': i}}, oracle=str(i))\n"
        "                for i in range(self.n)]\n"
        "    def make_env(self, task, pool=None, limits=None):\n"
        "        return JsonlEnv(task, lambda c, ex: float(c == str(ex['i'])), limits)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    suite = parse_spec("my_envs:Echo:n=4")
    assert len(suite) == 4 and suite.spec == "my_envs:Echo:n=4"
    assert len({t.id for t in suite}) == 4

    class Fixed(ListSuite):
        def build(self) -> list[Task]:
            return [Task.make("fixed", "toy", "hi")]

        def make_env(self, task, pool=None, limits=None):  # pragma: no cover - not run
            raise NotImplementedError

    monkeypatch.setitem(registry._REGISTRY, "fixed_test_suite", Fixed)
    assert parse_spec("fixed_test_suite").tasks()[0].prompt == "hi"
