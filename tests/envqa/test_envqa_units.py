"""The text checks and the oracle judgement on their own: normalisation, clusters, regexes, n-grams."""

from temper.envqa.checks.oracle import judge
from temper.envqa.checks.policy import stratum, summarise
from temper.envqa.config import EnvQAConfig
from temper.envqa.contamination import EvalIndex
from temper.envqa.dedup import find_duplicates, normalise, python_tokens
from temper.envqa.sensitive import luhn, scan_text
from temper.envs.suite import ListSuite
from temper.envs.task import Task


def test_python_normalisation_hides_renames_not_structure() -> None:
    a = python_tokens("def area(w, h):\n    return w * h  # rectangle\n")
    assert a == python_tokens("def surface(width, height):\n    return width * height\n")
    assert a != python_tokens("def area(w, h):\n    return w + h\n")
    assert python_tokens("x = 'a'  +  3") == ["ID", "=", "LIT", "+", "LIT"]


def test_clusters_exact_near_and_keeper() -> None:
    code = "def total(xs):\n    s = 0\n    for x in xs:\n        s += x\n    return s\n" * 3
    docs = {
        "a": normalise("Sum the numbers in the list and return the total.", {"f.py": code}),
        "b": normalise("Sum the numbers in the list and return the total.", {"f.py": code.replace("xs", "items")}),
        "c": normalise("Return the total: sum the numbers of the list.", {"f.py": code}),
        "d": normalise("Reverse the words of a sentence.", {"g.py": "def rev(s):\n    return s[::-1]\n"}),
    }
    (cl,) = find_duplicates(docs, 0.8, order=["b", "a", "c", "d"])
    assert cl.keeper == "b" and cl.members == ["b", "a", "c"] and cl.exact == ["a"]


def test_sensitive_patterns_and_placeholders() -> None:
    found = {f.kind for f in scan_text("f", "mail ann@corp.io, bob@example.com, call (415) 555-0132 or 2024-01-15\n"
                                            "card 5555 5555 5555 4444; not a card 1234 5678 9012 3456\n"
                                            "sk-abcdefghijklmnopqrstuvwx ghp_" + "a" * 36 + "\n"
                                            "-----BEGIN RSA PRIVATE KEY-----\n")}
    assert found == {"email", "phone", "card-number", "api-key (OpenAI/Anthropic)", "api-key (GitHub)",
                     "private-key (PEM)"}
    assert luhn("4111111111111111") and not luhn("4111111111111112")
    assert scan_text("data.csv", "10.0.0.1,2024-01-15,12345,3.14159\n") == []
    assert scan_text("x", "write to alice@example.org or ops@test\n") == []


class _Eval(ListSuite):
    def build(self) -> list[Task]:
        return [Task.make("ev", "x", "one two three four five six seven eight nine ten eleven twelve thirteen "
                          "fourteen", payload={"task_id": "Ev/1"})]

    def make_env(self, task, pool=None, limits=None):
        raise NotImplementedError


def test_ngram_overlap_names_source_and_span() -> None:
    index = EvalIndex.build([("ev", _Eval())], n=13)
    (hit,) = index.overlaps("Intro: one two three four five six seven eight nine ten eleven twelve thirteen. End")
    assert hit["source"] == "ev/Ev/1" and hit["tokens"] == 13 and hit["span"].startswith("one two")
    assert index.overlaps("one two three four five six seven eight nine ten eleven twelve") == []


def _run(value: float, draw: float = 0.0, limit: str | None = None) -> dict:
    return {"value": value, "components": {"draw": draw}, "failure": None, "limit": limit, "log": "x"}


def test_oracle_judgement() -> None:
    assert judge([_run(1), _run(1), _run(1)], 1.0)["verdict"] == "ok"
    assert judge([_run(1), _run(0), _run(1)], 1.0)["verdict"] == "flaky"
    assert judge([_run(1, 1), _run(1, 2)], 1.0)["verdict"] == "flaky"  # passes, but the figures disagree
    assert judge([_run(0), _run(0)], 1.0)["verdict"] == "broken"
    assert judge([_run(0, limit="wall_time")] * 2, 1.0)["verdict"] == "too-slow"


def test_policy_strata_and_sparsity() -> None:
    cfg = EnvQAConfig.from_recipe()
    assert [stratum(p, 8, 0.9) for p in (0, 1, 7, 8)] == ["too-hard", "learnable", "learnable", "too-easy"]
    s = summarise([1.0, 0.0, 0.0, 1.0], 1, cfg)
    assert s["pass_rate"] == 0.5 and s["ci"][0] < 0.5 < s["ci"][1] and not s["zero_variance"] and s["failures"] == 1
    assert summarise([0.0] * 4, 0, cfg)["zero_variance"] is True


def test_text_checks_never_read_a_host_file_through_a_link(tmp_path) -> None:
    from temper.envqa.loading import load_entries
    from temper.envqa.textchecks import folder_texts, text_checks

    host = tmp_path / "host-secret.txt"
    host.write_text("-----BEGIN RSA PRIVATE KEY-----\nroot@corp.io\n")
    for name, link in (("links-out", str(host)), ("links-in", "../instruction.md")):
        task = tmp_path / "tasks" / name
        (task / "tests").mkdir(parents=True)
        (task / "solution").mkdir()
        (task / "environment" / "data").mkdir(parents=True)
        (task / "instruction.md").write_text("Create /app/done.txt.\n")
        (task / "task.toml").write_text("")
        (task / "tests" / "test.sh").write_text("exit 0\n")
        (task / "solution" / "solve.sh").write_text("touch /app/done.txt\n")
        (task / "environment" / "data" / "notes.txt").symlink_to(link)
    _, entries = load_entries(f"terminal:path={tmp_path / 'tasks'}")
    by_name = {e.path.rsplit("/", 1)[-1]: e for e in entries}
    out = by_name["links-out"]
    assert out.load_error and "outside the folder" in out.load_error
    assert text_checks(out, EvalIndex.build([], n=13))["sensitive"]["findings"] == []  # refused: not read
    # a link that stays inside is kept by the loader, and never followed for its text either
    texts = folder_texts(tmp_path / "tasks" / "links-in")
    assert "instruction.md" in texts and "environment/data/notes.txt" not in texts
