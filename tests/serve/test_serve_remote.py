"""RemoteClient: the engine's GenerationClient over HTTP against a live `temper serve` (token ids
in and out, the engine's logprobs and versions, weights pushed from memory)."""

import asyncio

import pytest
from serve_helpers import ADMIN_TOKEN, LiveServer, serve_config

from temper.engine import AsyncEngine, EngineConfig, LLMEngine
from temper.generation import GenerationClient, RequestError, SamplingParams
from temper.generation.remote_client import RemoteClient
from temper.models import load_model

pytestmark = pytest.mark.e2e

PROMPT = [1, 504, 2113, 314, 260, 3529, 30]


def test_remote_generate_matches_the_in_process_engine(live, tiny_model_dir):
    client = RemoteClient(live.url, "tiny")
    assert isinstance(client, GenerationClient)
    loaded = load_model(tiny_model_dir)
    local = AsyncEngine(LLMEngine(loaded.model, loaded.tokenizer, EngineConfig(kv_budget_bytes=16 * 1024**2)))

    async def both():
        params = SamplingParams(temperature=0, max_tokens=8)
        try:
            return await asyncio.gather(client.generate(PROMPT, params), local.generate(PROMPT, params))
        finally:
            await client.aclose()

    try:
        remote, ref = asyncio.run(both())
    finally:
        local.close()
    assert remote.token_ids == ref.token_ids and remote.prompt_token_ids == PROMPT
    assert remote.logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    assert remote.versions == [0] * len(remote.token_ids) and remote.finish_reason in ("stop", "length")


def test_remote_sampling_concurrency_and_errors(live):
    client = RemoteClient(live.url, "tiny")

    async def run():
        try:
            params = SamplingParams(temperature=1.0, max_tokens=6, seed=3)
            outs = await asyncio.gather(*(client.generate(PROMPT, params) for _ in range(8)))
            with pytest.raises(RequestError, match="top_p"):
                await client.generate(PROMPT, SamplingParams(top_p=0.0))
            return outs
        finally:
            await client.aclose()

    outs = asyncio.run(run())
    assert len({tuple(o.token_ids) for o in outs}) == 1  # the same seed, the same sample
    assert all(len(o.logprobs) == len(o.token_ids) for o in outs)


def test_remote_push_weights_from_memory(tiny_model_dir, tiny_model_dir_b, tmp_path):
    new_state = load_model(tiny_model_dir_b).model.state_dict()
    with LiveServer(serve_config(tiny_model_dir, tmp_path, weights_dirs=[tmp_path / "push"])) as srv:
        client = RemoteClient(srv.url, "tiny", weights_dir=str(tmp_path / "push"), admin_token=ADMIN_TOKEN)

        async def run():
            try:
                params = SamplingParams(temperature=0, max_tokens=8)
                before = await client.generate(PROMPT, params)
                await client.load_weights(new_state, version=3)
                after = await client.generate(PROMPT, params)
                return before, after
            finally:
                await client.aclose()

        before, after = asyncio.run(run())
    assert before.versions[0] == 0 and after.versions == [3] * len(after.token_ids)
    assert after.logprobs != pytest.approx(before.logprobs, abs=1e-3) or after.token_ids != before.token_ids
    assert not list((tmp_path / "push").rglob("*.safetensors"))  # the pushed copy is removed after loading


def test_remote_structured_outputs_reach_the_server(live):
    """A constrained SamplingParams is sent as vLLM's structured_outputs, not dropped on the way."""
    from temper.generation import StructuredOutputs

    client = RemoteClient(live.url, "tiny")
    so = StructuredOutputs(choice=("north", "south"))

    async def run():
        try:
            return await asyncio.gather(*(client.generate(PROMPT, SamplingParams(max_tokens=20, seed=s, structured=so))
                                          for s in range(4)))
        finally:
            await client.aclose()

    for c in asyncio.run(run()):
        assert live.app.state.server.variants.tokenizer.decode(c.token_ids, skip_special_tokens=True) \
            in ("north", "south") and c.finish_reason == "stop"
    assert so.as_dict() == {"choice": ["north", "south"]}
    assert StructuredOutputs.from_dict(so.as_dict(), "x") == so
