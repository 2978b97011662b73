"""inspect-ai's default `openai/` provider against temper serve: it speaks the Responses
API, so a few inline samples evaluate end to end and every generation goes through /v1/responses."""

import httpx
import pytest
from serve_helpers import metric

pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]


def test_inspect_ai_evaluates_inline_samples_through_the_responses_api(live, tmp_path, monkeypatch):
    from inspect_ai import Task
    from inspect_ai import eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    def count(route: str) -> float:
        return metric(httpx.get(f"{live.url}/metrics").text, "temper_serve_http_requests_total", route=route,
                      method="POST", status="200")

    before, chats = count("/v1/responses"), count("/v1/chat/completions")
    task = Task(dataset=[Sample(input="Say hi", target="hi"), Sample(input="Name a colour", target="red"),
                         Sample(input="Count to three", target="three")], solver=generate(), scorer=includes())
    (log,) = inspect_eval(task, model="openai/tiny", model_base_url=f"{live.url}/v1", display="none",
                          log_dir=str(tmp_path / "logs"), max_tokens=8, temperature=0)
    assert log.status == "success" and len(log.samples) == 3
    assert all(s.output.completion and s.scores for s in log.samples)
    usage = log.stats.model_usage["openai/tiny"]
    assert usage.output_tokens == 3 * 8 and usage.input_tokens > 3 * 10
    # the provider's default is the Responses API (one request per sample, and its own first probe)
    assert count("/v1/responses") - before >= 3 and count("/v1/chat/completions") == chats
