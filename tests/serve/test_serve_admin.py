"""Only the operator steers `temper serve`: each way a stranger could steer a live server (load weights from
any path, set any version, pause everyone, abort others' requests, flood the engine with one request, hold
it with a grammar that compiles for seconds), refused; beside each, the operator (or the user, for its own
requests) doing it."""

import asyncio
import threading
import time
from pathlib import Path

import httpx
import pytest
from serve_helpers import ADMIN, LiveServer, serve_config, until_running

pytestmark = pytest.mark.e2e

PROMPT = [1, 504, 2113, 314, 260, 3529, 30]
STRANGER = {"Authorization": "Bearer sk-stranger"}
VICTIM = {"Authorization": "Bearer sk-victim"}


@pytest.fixture(scope="module")
def srv(tiny_model_dir: Path, tiny_model_dir_b: Path, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("admin")
    with LiveServer(serve_config(tiny_model_dir, tmp, weights_dirs=[tiny_model_dir_b.parent],
                                 max_pause_s=1.0)) as s:
        yield s


def _version(srv: LiveServer) -> int:
    return int(httpx.get(f"{srv.url}/weight_info").json()["weight_version"])


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    error = r.json()["error"]  # OpenAI's error shape
    assert error["message"] and error["type"]
    return error


def test_without_a_token_configured_the_operator_routes_are_off(tiny_model_dir, tiny_model_dir_b, tmp_path):
    with LiveServer(serve_config(tiny_model_dir, tmp_path)) as off:
        for path, body in [("/v1/load_weights", {"path": str(tiny_model_dir_b), "version": 1}),
                           ("/update_weights", {"update_info": {"path": str(tiny_model_dir_b), "version": 1}}),
                           ("/update_weight_version", {"new_version": "9"}),
                           ("/finish_weight_update", {"weight_version": "9"}), ("/pause", None), ("/resume", None)]:
            r = httpx.post(f"{off.url}{path}", json=body, headers=ADMIN)
            assert _error(r, 403)["code"] == "admin_disabled", path
        assert _version(off) == 0 and httpx.get(f"{off.url}/is_paused").json() == {"is_paused": False}


def test_a_stranger_cannot_load_weights_and_the_operator_can(srv, tiny_model_dir_b):
    before = _version(srv)
    for path, body in [("/v1/load_weights", {"path": str(tiny_model_dir_b), "version": before + 1}),
                       ("/update_weights", {"update_info": {"path": str(tiny_model_dir_b), "version": before + 1}})]:
        for headers in (None, STRANGER):
            assert _error(httpx.post(f"{srv.url}{path}", json=body, headers=headers), 401)["code"] == \
                "invalid_admin_token"
    assert _version(srv) == before
    r = httpx.post(f"{srv.url}/v1/load_weights", json={"path": str(tiny_model_dir_b), "version": before + 1},
                   headers=ADMIN, timeout=60)
    assert r.status_code == 200 and _version(srv) == before + 1, r.text


def test_weights_load_only_from_the_configured_folders_and_say_nothing_of_others(srv, tiny_model_dir,
                                                                                tiny_model_dir_b, tmp_path):
    v = _version(srv)
    outside = [str(tiny_model_dir), str(tmp_path / "no-such-folder"), str(tiny_model_dir_b.parent / ".." / "x"),
               "/etc"]
    bodies = [httpx.post(f"{srv.url}/v1/load_weights", json={"path": p, "version": v + 1}, headers=ADMIN).json()
              for p in outside]
    assert all(b == bodies[0] for b in bodies), bodies  # an existing folder and a missing one answer alike
    assert bodies[0]["error"]["code"] == "path_not_allowed" and bodies[0]["error"]["param"] == "path"
    r = httpx.post(f"{srv.url}/update_weights", json={"update_info": {"path": str(tiny_model_dir), "version": v + 1}},
                   headers=ADMIN)
    assert _error(r, 403)["param"] == "update_info.path"
    assert _version(srv) == v


def test_versions_move_forward_only_and_only_for_the_operator(srv, tiny_model_dir_b):
    v = _version(srv)
    for path, body in [("/update_weight_version", {"new_version": "-5"}),
                       ("/finish_weight_update", {"weight_version": "-5"})]:
        _error(httpx.post(f"{srv.url}{path}", json=body, headers=STRANGER), 401)
        _error(httpx.post(f"{srv.url}{path}", json=body), 401)
        assert _error(httpx.post(f"{srv.url}{path}", json=body, headers=ADMIN), 400)["param"] in (
            "new_version", "weight_version")
    assert _version(srv) == v
    ok = httpx.post(f"{srv.url}/update_weight_version", json={"new_version": str(v + 2)}, headers=ADMIN)
    assert ok.status_code == 200 and _version(srv) == v + 2
    back = httpx.post(f"{srv.url}/v1/load_weights", json={"path": str(tiny_model_dir_b), "version": v + 1},
                      headers=ADMIN)
    assert _error(back, 400)["param"] == "version" and _version(srv) == v + 2


def test_a_strangers_pause_is_refused_and_the_operators_lapses(srv):
    r = httpx.post(f"{srv.url}/pause", params={"mode": "keep"}, headers=STRANGER)
    _error(r, 401)
    assert httpx.get(f"{srv.url}/is_paused").json() == {"is_paused": False}
    assert httpx.post(f"{srv.url}/pause", params={"mode": "keep"}, headers=ADMIN).json() == {"status": "paused"}
    assert httpx.get(f"{srv.url}/health").json()["status"] == "paused"
    start = time.monotonic()
    # a request sent while paused waits, then runs once the pause lapses (max_pause_s: 1)
    r = httpx.post(f"{srv.url}/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 2}, timeout=60)
    assert r.status_code == 200 and 0.5 < time.monotonic() - start < 30
    assert httpx.get(f"{srv.url}/health").json()["status"] == "ok"
    assert httpx.get(f"{srv.url}/is_paused").json() == {"is_paused": False}


def test_an_abort_reaches_only_the_callers_own_requests(srv):
    async def run() -> tuple[dict, str, dict, str]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120) as http:
            def long(rid: str, headers: dict) -> asyncio.Future:
                return asyncio.ensure_future(http.post("/inference/v1/generate", headers=headers, json={
                    "token_ids": PROMPT, "request_id": rid, "sampling_params": {"max_tokens": 400,
                                                                                 "ignore_eos": True}}))

            victim = long("victim", VICTIM)
            await until_running(http, victim)
            stranger = (await http.post("/abort_requests", json={}, headers=STRANGER)).json()
            named = (await http.post("/abort_requests", json={"request_ids": ["victim"]}, headers=STRANGER)).json()
            assert named["aborted"] == 0
            first = (await victim).json()["choices"][0]["finish_reason"]
            own = long("own", VICTIM)
            await until_running(http, own)
            mine = (await http.post("/abort_requests", json={}, headers=VICTIM)).json()
            return stranger, first, mine, (await own).json()["choices"][0]["finish_reason"]

    stranger, first, mine, second = asyncio.run(run())
    assert stranger == {"status": "aborted", "aborted": 0} and first == "length"
    assert mine == {"status": "aborted", "aborted": 1} and second == "abort"


def test_the_operator_aborts_anyones_requests(srv):
    async def run() -> tuple[dict, str]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120) as http:
            victim = asyncio.ensure_future(http.post("/inference/v1/generate", headers=VICTIM, json={
                "token_ids": PROMPT, "sampling_params": {"max_tokens": 400, "ignore_eos": True}}))
            await until_running(http, victim)
            out = (await http.post("/abort_requests", json={}, headers=ADMIN)).json()
            return out, (await victim).json()["choices"][0]["finish_reason"]

    out, reason = asyncio.run(run())
    assert out == {"status": "aborted", "aborted": 1} and reason == "abort"


def test_admission_counts_sequences_with_a_cap_per_request(srv):
    flood = {"model": "tiny", "prompt": [PROMPT] * 64, "n": 16, "max_tokens": 1}
    r = httpx.post(f"{srv.url}/v1/completions", json=flood, headers=STRANGER, timeout=120)
    assert _error(r, 400)["param"] == "n" and "max_sequences_per_request" in r.json()["error"]["message"]
    g = httpx.post(f"{srv.url}/inference/v1/generate", headers=STRANGER, timeout=120, json={
        "token_ids": PROMPT, "sampling_params": {"n": 1000, "max_tokens": 1}})
    assert _error(g, 400)["param"] == "sampling_params.n"
    ok = httpx.post(f"{srv.url}/v1/completions", json={**flood, "prompt": [PROMPT] * 4}, timeout=120)  # 64
    assert ok.status_code == 200 and len(ok.json()["choices"]) == 64


def test_sequences_in_flight_are_bounded(tiny_model_dir, tmp_path):
    with LiveServer(serve_config(tiny_model_dir, tmp_path, **{"queue.max_sequences": 4})) as s:
        async def run() -> tuple[int, int, int]:
            async with httpx.AsyncClient(base_url=s.url, timeout=120) as http:
                held = asyncio.ensure_future(http.post("/v1/completions", json={
                    "model": "tiny", "prompt": PROMPT, "n": 3, "max_tokens": 200, "ignore_eos": True}))
                await until_running(http, held)
                two = await http.post("/v1/completions", json={"model": "tiny", "prompt": PROMPT, "n": 2,
                                                               "max_tokens": 1})
                one = await http.post("/v1/completions", json={"model": "tiny", "prompt": PROMPT, "max_tokens": 1})
                return (await held).status_code, two.status_code, one.status_code

        held, two, one = asyncio.run(run())
    assert (held, two, one) == (200, 429, 200)


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema, "b": {"type": "integer"}}, "required": ["a"]}
    return schema


def _schema_request(schema: dict) -> dict:
    return {"model": "tiny", "prompt": "JSON:", "max_tokens": 4,
            "response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": schema}}}


def _plain_while(url: str, slow: dict) -> tuple[httpx.Response, float]:
    """`slow` sent, then (0.3 s later) a plain request: the slow one's answer and the plain one's latency."""
    out: dict = {}
    t = threading.Thread(target=lambda: out.setdefault("r", httpx.post(f"{url}/v1/completions", json=slow,
                                                                       timeout=300)))
    t.start()
    time.sleep(0.3)
    start = time.monotonic()
    plain = httpx.post(f"{url}/v1/completions", json={"model": "tiny", "prompt": "Hi", "max_tokens": 2}, timeout=300)
    latency = time.monotonic() - start
    t.join(300)
    assert plain.status_code == 200
    return out["r"], latency


def test_a_deep_schema_is_refused_before_it_compiles(srv):
    schema = _nested(200)  # 600 deep: seconds of xgrammar's compile
    r, latency = _plain_while(srv.url, _schema_request(schema))
    assert latency < 2.0, f"a plain request waited {latency:.1f} s behind the schema's compile"
    error = _error(r, 400)
    assert error["param"] == "response_format" and "grammar.max_depth" in error["message"]
    structured = httpx.post(f"{srv.url}/inference/v1/generate", json={
        "token_ids": PROMPT, "sampling_params": {"structured_outputs": {"json": schema}}})
    assert _error(structured, 400)["param"] == "sampling_params.structured_outputs"
    ok = httpx.post(f"{srv.url}/v1/completions", json=_schema_request(_nested(3)), timeout=60)
    assert ok.status_code == 200  # a schema within the limits compiles and runs


def test_a_slow_compile_runs_off_the_engine_and_times_out(tiny_model_dir, tmp_path):
    cfg = serve_config(tiny_model_dir, tmp_path, **{"grammar.max_depth": 100_000, "grammar.compile_timeout_s": 0.5})
    with LiveServer(cfg) as s:
        httpx.post(f"{s.url}/v1/completions", json={**_schema_request(_nested(1)), "max_tokens": 1}, timeout=60)
        start = time.monotonic()
        r, latency = _plain_while(s.url, _schema_request(_nested(150)))  # about 4 s of compile
        assert latency < 2.0, f"a plain request waited {latency:.1f} s behind the schema's compile"
        error = _error(r, 400)
        assert error["param"] == "response_format" and "grammar.compile_timeout_s" in error["message"], error
        assert time.monotonic() - start < 10
