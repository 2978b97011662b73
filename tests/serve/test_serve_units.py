"""The server's pure parts: routing policy and A/B stickiness, redaction, cost, budgets, error bodies."""

import pytest

from temper.errors import TemperError
from temper.generation import Prices, StructuredOutputs
from temper.generation.remote_client import read_secret
from temper.serve.config import ABConfig, BudgetConfig, RoutingConfig, ServeConfig, UsageConfig
from temper.serve.metrics import Metrics
from temper.serve.redact import redact
from temper.serve.router import Router, UnknownModel, ab_arm, split_model
from temper.serve.schemas import ChatRequest, describe_validation
from temper.serve.usage import Budgets, key_id


def route(router: Router, **kw):
    args = dict(temperature=0.0, prompt_tokens=10, inflight=0)
    args.update(kw)
    r = router.route("auto", **args)
    return r.variant, r.reason


def test_model_names():
    assert split_model("m", "m") == "standard"
    assert split_model("m:fast", "m") == "fast"
    assert split_model("m:auto", "m") == "auto"
    with pytest.raises(UnknownModel):
        split_model("other", "m")
    with pytest.raises(UnknownModel):
        split_model("m:turbo", "m")


def test_auto_policy_order():
    r = Router(RoutingConfig(min_prompt_tokens_fast=100, max_load_for_fast=4, fast_below_latency_ms=1000))
    assert r.route("fast", temperature=1.0, prompt_tokens=1, inflight=99).variant == "fast"  # explicit wins
    assert route(r, temperature=0.8) == ("standard", "sampled")
    assert route(r, task_type="code", inflight=99) == ("fast", "task:code")
    assert route(r, task_type="chat", prompt_tokens=500) == ("standard", "task:chat")
    assert route(r, latency_budget_ms=500) == ("fast", "latency_budget")
    assert route(r, latency_budget_ms=5000) == ("standard", "default")
    assert route(r, prompt_tokens=500, inflight=5) == ("standard", "load")
    assert route(r, prompt_tokens=500) == ("fast", "prompt_length")
    assert route(r) == ("standard", "default")


def test_ab_split_is_sticky_and_proportional():
    arms = [ab_arm(f"user-{i}", 0.3, "s") for i in range(4000)]
    assert 0.26 < arms.count("fast") / len(arms) < 0.34
    assert all(ab_arm(f"user-{i}", 0.3, "s") == arms[i] for i in range(200))  # same key, same arm
    r = Router(RoutingConfig(ab=ABConfig(enabled=True, fast_fraction=1.0)))
    assert route(r, user_key="alice") == ("fast", "ab")
    assert route(r) == ("standard", "default")  # no key: not in the experiment


@pytest.mark.parametrize(("text", "gone", "tag"), [
    ("write to ann.lee+x@mail.example.org today", "ann.lee", "[EMAIL]"),
    ("call +1 (415) 555-0134 now", "555-0134", "[PHONE]"),
    ("call 020 7946 0958", "7946", "[PHONE]"),
    ("card 5500-0000-0000-0004 exp", "5500", "[CARD]"),
    ("OPENAI_API_KEY=sk-proj-AbCdEf0123456789xyzXYZ", "AbCdEf", "[SECRET]"),
    ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7", "[SECRET]"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abc", "[SECRET]"),
    ("Authorization: Bearer abc.def-ghi_jkl012345", "abc.def", "[SECRET]"),
    ('password: "hunter2hunter2"', "hunter2", "[SECRET]"),
])
def test_redaction(text, gone, tag):
    out = redact(text)
    assert gone not in out and tag in out, out


def test_redaction_keeps_ordinary_numbers():
    text = "In 2024, 3.14159 and order 1234567890123 (not a card) at 12:30 on 2024-05-01, version 1.2.3"
    assert redact(text) == text


def test_cost_and_budgets(caplog):
    p = Prices(input=1.0, cached_input=0.25, output=4.0)
    assert p.cost(1000, 100, cached_tokens=600) == pytest.approx((400 + 150 + 400) / 1e6)
    m = Metrics()
    b = Budgets(UsageConfig(budgets=BudgetConfig(per_key_daily_usd=1.0, daily_usd=10, alert_thresholds=[0.5, 0.9],
                                                 hard_limit=True)), m)
    b.add("k1", 0.6)
    assert b.refusal("k1") is None
    b.add("k1", 0.3)
    b.add("k1", 0.2)
    assert "daily budget" in b.refusal("k1") and b.refusal("k2") is None
    alerts = [r.getMessage() for r in caplog.records if "budget alert" in r.getMessage()]
    assert len(alerts) == 2  # 50% and 90% of the key's budget, each once
    assert key_id("sk-abc") != "sk-abc" and key_id("sk-abc") == key_id("sk-abc") and key_id(None) == "anonymous"


def test_validation_messages_name_fields():
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        ChatRequest.model_validate({"model": "m", "messages": [{"role": "user"}], "top_p": 3})
    message, param = describe_validation(err.value.errors())
    assert param in ("messages.0", "top_p")
    assert "top_p: Input should be less than or equal to 1" in message
    assert "messages.0: content is required" in message


def test_config_requires_ngram():
    with pytest.raises(ValueError, match="ngram"):
        ServeConfig.model_validate({"engine": {"speculative": {"method": None}}})


@pytest.mark.e2e  # `temper serve` processes (they stop at the bad input, after its imports)
def test_cli_bad_input_is_one_clear_line(tmp_path):
    import os
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "temper", "serve", "--set", "queue.max_requests=0",
                          "--set", "routing.default=turbo"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 2 and "queue.max_requests" in lines[0] and "routing.default" in lines[1], run.stderr
    run = subprocess.run([sys.executable, "-m", "temper", "serve", "--model", str(tmp_path / "nope")],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1 and "nope" in run.stderr, run.stderr


def test_the_admin_token_comes_from_a_file_or_the_environment(tmp_path, monkeypatch):
    (tmp_path / "token").write_text("s3cret\n")
    monkeypatch.setenv("TEMPER_TEST_TOKEN", " s3cret ")
    monkeypatch.setenv("TEMPER_TEST_EMPTY", "")
    assert read_secret(str(tmp_path / "token"), None, "admin_token") == "s3cret"
    assert read_secret(None, "TEMPER_TEST_TOKEN", "admin_token") == "s3cret"
    assert read_secret(None, None, "admin_token") is None  # not configured: the operator's routes are off
    for file, env, why in [(str(tmp_path / "token"), "TEMPER_TEST_TOKEN", "not both"),
                           (None, "TEMPER_TEST_EMPTY", "is empty"), (None, "TEMPER_TEST_UNSET", "is empty"),
                           (str(tmp_path / "missing"), None, "cannot read")]:
        monkeypatch.delenv("TEMPER_TEST_UNSET", raising=False)
        with pytest.raises(TemperError, match=why):
            read_secret(file, env, "admin_token")


def test_a_constraints_size_and_depth_count_brackets_outside_json_strings():
    assert StructuredOutputs(json='{"a": {"b": "{{{[[["}}').size_and_depth() == (22, 2)
    assert StructuredOutputs(regex=r"(a(b)\(c)").size_and_depth()[1] == 2
    assert StructuredOutputs(choice=("yes", "no")).size_and_depth() == (6, 0)
