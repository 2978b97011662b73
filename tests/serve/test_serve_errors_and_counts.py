"""OpenAI semantics at the edges: a streamed answer ends with a usage chunk only when
asked; unknown routes and methods answer in the OpenAI error shape; /metrics counts every request by
route and status, 4xx and 5xx included; refused requests leave a usage record with their status."""

import json

import httpx
import openai
import pytest
from serve_helpers import metric

pytestmark = pytest.mark.e2e


def test_a_stream_has_a_usage_chunk_only_when_asked(live):
    client = live.client()
    kw = dict(model="tiny", messages=[{"role": "user", "content": "Say something"}], max_tokens=4, temperature=0)
    plain = list(client.chat.completions.create(**kw, stream=True))
    assert plain and all(c.usage is None for c in plain) and all(c.choices for c in plain)
    asked = list(client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}))
    assert asked[-1].choices == [] and asked[-1].usage.completion_tokens > 0
    text = list(client.completions.create(model="tiny", prompt="Hi", max_tokens=3, stream=True))
    assert all(c.usage is None for c in text)


def test_unknown_routes_and_methods_are_openai_errors(live):
    client = live.client()
    with pytest.raises(openai.NotFoundError) as err:
        client.post("/no/such/route", cast_to=object, body={})
    assert err.value.body["message"] == "POST /v1/no/such/route: no such route"  # the client parsed our shape
    r = httpx.get(f"{live.url}/v1/chat/completions")
    assert r.status_code == 405 and r.json()["error"]["code"] == "method_not_allowed", r.text
    assert "detail" not in r.json()


def test_metrics_count_every_request_by_route_and_status(live):
    before = httpx.get(f"{live.url}/metrics").text
    base = {s: metric(before, "temper_serve_http_requests_total", route="/v1/completions", method="POST",
                      status=s) for s in ("200", "400")}
    client = live.client()
    client.completions.create(model="tiny", prompt="Hi", max_tokens=2)
    for bad in ({"max_tokens": -1}, {"temperature": "hot"}):
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="tiny", prompt="Hi", **bad)
    httpx.get(f"{live.url}/v1/nowhere")
    text = httpx.get(f"{live.url}/metrics").text
    count = lambda **labels: metric(text, "temper_serve_http_requests_total", **labels)  # noqa: E731
    assert count(route="/v1/completions", method="POST", status="200") == base["200"] + 1
    assert count(route="/v1/completions", method="POST", status="400") == base["400"] + 2
    assert count(route="unmatched", method="GET", status="404") >= 1


def test_refused_requests_leave_usage_records_with_their_status(live):
    client = live.client()
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "x"}], temperature="hot")
    records = [json.loads(x) for x in (live.tmp / "usage.jsonl").read_text().splitlines()]
    refused = [r for r in records if r["status"] == "rejected" and r["endpoint"] == "chat"]
    assert refused and refused[-1]["http_status"] == 400 and "temperature" in refused[-1]["error"]
