"""Limits and failures of `temper serve`: the bounded queue (429 + Retry-After), budgets with hard
limits, a request failing alone, a client going away, new weights, and graceful shutdown."""

import threading
import time

import httpx
import openai
import pytest
from serve_helpers import ADMIN, LiveServer, metric, serve_config

from temper.generation import RequestError

pytestmark = pytest.mark.e2e


def _wait(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_queue_bound_returns_429_with_retry_after(tiny_model_dir, tmp_path):
    cfg = serve_config(tiny_model_dir, tmp_path, **{"queue.max_requests": 1, "queue.retry_after_s": 3})
    with LiveServer(cfg) as srv:
        client = srv.client()
        stream = client.completions.create(model="tiny", prompt="go", max_tokens=400, temperature=0, stream=True,
                                           extra_body={"ignore_eos": True})
        next(iter(stream))  # the first request is running now
        with pytest.raises(openai.RateLimitError) as err:
            client.completions.create(model="tiny", prompt="me too", max_tokens=2)
        assert err.value.response.headers["retry-after"] == "3"
        assert err.value.body["code"] == "queue_full"
        stream.close()  # the client goes away: its engine request is aborted
        _wait(lambda: not srv.engine.has_unfinished() and srv.app.state.server.variants.inflight == 0)
        assert metric(httpx.get(f"{srv.url}/metrics").text, "temper_serve_rejected_total", reason="queue_full") == 1
        assert client.completions.create(model="tiny", prompt="now", max_tokens=2).choices  # room again


def test_budget_alerts_and_hard_limit_per_key(tiny_model_dir, tmp_path, caplog):
    cfg = serve_config(tiny_model_dir, tmp_path, **{
        "usage.budgets.per_key_daily_usd": 1e-9, "usage.budgets.hard_limit": True,
        "usage.budgets.alert_thresholds": [0.5, 1.0]})
    with LiveServer(cfg) as srv:
        spender = srv.client(api_key="sk-spender")
        spender.completions.create(model="tiny", prompt="spend", max_tokens=4)  # allowed: nothing spent yet
        with pytest.raises(openai.RateLimitError) as err:
            spender.completions.create(model="tiny", prompt="more", max_tokens=4)
        assert err.value.body["code"] == "budget_exceeded" and "daily budget" in err.value.body["message"]
        assert int(err.value.response.headers["retry-after"]) > 0
        assert srv.client(api_key="sk-other").completions.create(model="tiny", prompt="x", max_tokens=2).choices
        text = httpx.get(f"{srv.url}/metrics").text
        assert metric(text, "temper_serve_budget_alerts_total", scope="key", threshold="1") >= 1
        assert metric(text, "temper_serve_rejected_total", reason="budget") == 1
    assert any("budget alert" in r.getMessage() for r in caplog.records)


def test_a_failing_request_fails_alone(live, monkeypatch):
    variants = live.app.state.server.variants
    real = variants.submit

    async def flaky(prompts, params, request_id, variant, owner="anonymous"):
        if params.max_tokens == 13:
            raise RuntimeError("injected engine failure")
        if params.max_tokens == 14:
            raise RequestError(f"request {request_id!r}: sampling_params.min_p=0.5 injected")
        return await real(prompts, params, request_id, variant, owner)

    monkeypatch.setattr(variants, "submit", flaky)
    client = live.client()
    results: dict[int, object] = {}

    def call(i: int) -> None:
        try:
            results[i] = client.completions.create(model="tiny", prompt=f"job {i}", max_tokens=13 if i == 3 else
                                                   14 if i == 4 else 6, temperature=0).choices[0].text
        except openai.APIStatusError as exc:
            results[i] = exc.status_code

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results[3] == 500 and results[4] == 400
    assert all(isinstance(results[i], str) for i in range(8) if i not in (3, 4)), results
    assert httpx.get(f"{live.url}/health").json()["status"] == "ok"


def test_load_weights_changes_outputs(tiny_model_dir, tiny_model_dir_b, tmp_path):
    with LiveServer(serve_config(tiny_model_dir, tmp_path, weights_dirs=[tiny_model_dir_b.parent, tmp_path])) as srv:
        client = srv.client()
        kw = dict(model="tiny", prompt="The capital of France is", max_tokens=12, temperature=0,
                  extra_body={"return_token_ids": True})
        before = client.completions.create(**kw).choices[0]
        r = httpx.post(f"{srv.url}/v1/load_weights", json={"path": str(tiny_model_dir_b), "version": 5}, timeout=60,
                       headers=ADMIN)
        assert r.status_code == 200 and r.json()["version"] == 5
        after = client.completions.create(**kw).choices[0]
        assert after.model_extra["token_ids"] != before.model_extra["token_ids"]
        assert after.model_extra["versions"] == [5] * len(after.model_extra["token_ids"])
        assert httpx.get(f"{srv.url}/health").json()["policy_version"] == 5
        bad = httpx.post(f"{srv.url}/v1/load_weights", json={"path": str(tmp_path / "nowhere"), "version": 6},
                         headers=ADMIN)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "path"
        bad = httpx.post(f"{srv.url}/v1/load_weights", json={"path": str(tiny_model_dir_b)}, headers=ADMIN)
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "version"


def test_graceful_shutdown_finishes_in_flight_requests(tiny_model_dir, tmp_path):
    srv = LiveServer(serve_config(tiny_model_dir, tmp_path), grace_s=30)
    with srv:
        client = srv.client()
        got: list[str | None] = []

        def long_call() -> None:
            chunks = list(client.completions.create(model="tiny", prompt="keep going", max_tokens=120, temperature=0,
                                                    stream=True, extra_body={"ignore_eos": True}))
            got.append(next(c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason))

        t = threading.Thread(target=long_call)
        t.start()
        _wait(lambda: srv.engine.requests)  # in flight
        srv.server.should_exit = True  # what SIGTERM does
        t.join(120)
        assert got == ["length"]  # it finished all 120 tokens
    assert not srv.thread.is_alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{srv.url}/health")
