"""vLLM's RL routes on temper serve: /inference/v1/generate through the very client temper
uses for vLLM (VllmClient), /pause in its three modes, /abort_requests, and a weight update under
vLLM's route while a request is held in flight (it resumes and carries both versions)."""

import asyncio
from pathlib import Path

import httpx
import pytest
from serve_helpers import ADMIN, LiveServer, serve_config, until_running

from temper.generation import SamplingParams
from temper.models import Tokenizer
from temper.rollout_servers.vllm_client import VllmClient

pytestmark = pytest.mark.e2e

PROMPT = [1, 504, 2113, 314, 260, 3529, 30]


@pytest.fixture(scope="module")
def srv(tiny_model_dir: Path, tiny_model_dir_b: Path, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rl")
    with LiveServer(serve_config(tiny_model_dir, tmp, weights_dirs=[tiny_model_dir_b.parent])) as s:
        yield s


def test_generate_speaks_vllms_token_route_with_the_engines_logprobs(srv, tiny_model_dir):
    client = VllmClient(srv.url, "tiny", Tokenizer.from_folder(tiny_model_dir))
    params = SamplingParams(temperature=0.9, max_tokens=12, seed=11, ignore_eos=True)
    got = asyncio.run(client.generate(PROMPT, params))
    ref = httpx.post(f"{srv.url}/v1/completions", json={
        "model": "tiny", "prompt": PROMPT, "max_tokens": 12, "temperature": 0.9, "seed": 11, "ignore_eos": True,
        "logprobs": 0, "return_token_ids": True}).json()["choices"][0]
    assert got.token_ids == ref["token_ids"] and len(got.token_ids) == 12
    assert got.logprobs == pytest.approx(ref["token_logprobs"], abs=1e-6)
    assert got.versions == [srv.engine.version] * 12 and got.finish_reason == "length"
    bad = httpx.post(f"{srv.url}/inference/v1/generate", json={"token_ids": PROMPT,
                                                              "sampling_params": {"temperature": -1}})
    assert bad.status_code == 400 and "temperature" in bad.json()["error"]["message"]


def test_pause_keep_holds_a_request_across_a_weight_update(srv, tiny_model_dir_b):
    async def run() -> tuple[dict, bool, dict]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120, headers=ADMIN) as http:
            long = asyncio.ensure_future(http.post("/v1/completions", json={
                "model": "tiny", "prompt": PROMPT, "max_tokens": 300, "temperature": 1.0, "ignore_eos": True,
                "return_token_ids": True}))
            await until_running(http, long)
            assert (await http.post("/pause", params={"mode": "keep"})).json() == {"status": "paused"}
            assert (await http.get("/is_paused")).json() == {"is_paused": True}
            late = asyncio.ensure_future(http.post("/v1/completions", json={"model": "tiny", "prompt": "Hi",
                                                                            "max_tokens": 2}))
            old = srv.engine.version
            r = await http.post("/update_weights", json={"update_info": {"path": str(tiny_model_dir_b),
                                                                         "version": old + 1}})
            assert r.status_code == 200, r.text
            await asyncio.sleep(0.3)
            waited = not late.done()  # a request that arrived while paused waits for /resume
            await http.post("/resume")
            info = (await http.get("/weight_info")).json()
            return (await long).json()["choices"][0], waited and (await late).status_code == 200, info

    choice, waited, info = asyncio.run(run())
    versions = choice["versions"]
    assert waited and info["weight_version"] == str(versions[-1])
    k = versions.index(versions[-1])
    assert 0 < k < 300 and set(versions[:k]) == {versions[0]} and versions[-1] == versions[0] + 1, versions


def test_pause_abort_and_abort_requests_end_requests_with_abort(srv):
    async def run() -> tuple[str, dict, str]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120, headers=ADMIN) as http:
            def long(rid: str) -> asyncio.Future:
                sp = {"max_tokens": 400, "ignore_eos": True}
                return asyncio.ensure_future(http.post("/inference/v1/generate", json={
                    "token_ids": PROMPT, "request_id": rid, "sampling_params": sp}))

            one = long("victim")
            await until_running(http, one)
            aborted = (await http.post("/abort_requests", json={"request_ids": ["victim"]})).json()
            first = (await one).json()["choices"][0]["finish_reason"]
            two = long("second")
            await until_running(http, two)
            await http.post("/pause", params={"mode": "abort"})
            second = (await two).json()["choices"][0]["finish_reason"]
            await http.post("/resume")
            return first, aborted, second

    first, aborted, second = asyncio.run(run())
    assert first == "abort" and aborted == {"status": "aborted", "aborted": 1} and second == "abort"
    assert httpx.get(f"{srv.url}/is_paused").json() == {"is_paused": False}


def test_pause_wait_lets_running_requests_finish_and_versions_are_integers(srv):
    async def run() -> tuple[str, bool]:
        async with httpx.AsyncClient(base_url=srv.url, timeout=120, headers=ADMIN) as http:
            one = asyncio.ensure_future(http.post("/inference/v1/generate", json={
                "token_ids": PROMPT, "sampling_params": {"max_tokens": 200, "ignore_eos": True}}))
            await until_running(http, one)
            await http.post("/pause", params={"mode": "wait"})
            done = one.done()
            await http.post("/resume")
            return (await one).json()["choices"][0]["finish_reason"], done

    reason, done_before_pause_returned = asyncio.run(run())
    assert reason == "length" and done_before_pause_returned
    r = httpx.post(f"{srv.url}/update_weight_version", json={"new_version": "v-next"}, headers=ADMIN)
    assert r.status_code == 400 and "integers" in r.json()["error"]["message"]
    assert httpx.post(f"{srv.url}/pause", params={"mode": "later"}, headers=ADMIN).status_code == 400
