"""The episode endpoint is serve's route layer over the run's client: with the real openai client against
it, the program's sampling never reaches the policy (the agent config's does), the bodies and streams are
serve's, and a policy failure is the episode's engine error."""

import asyncio

import openai
import pytest

from temper.agent.config import AgentConfig
from temper.external.endpoint import EpisodeEndpoint, EpisodeState
from temper.generation import Completion, SamplingParams


class Spy:
    """A GenerationClient that answers "Hello" and keeps the parameters it was asked with."""

    def __init__(self, tokenizer, fail: bool = False):
        self.tokenizer, self.fail, self.seen = tokenizer, fail, []

    async def generate(self, token_ids: list[int], params: SamplingParams) -> Completion:
        self.seen.append(params)
        if self.fail:
            raise RuntimeError("the policy is down")
        ids = self.tokenizer.encode("Hello")
        return Completion("spy", 0, list(token_ids), token_ids=ids, text="Hello", logprobs=[-0.5] * len(ids),
                          versions=[3] * len(ids), finish_reason="stop")


def _episode(tokenizer, fail: bool = False) -> EpisodeState:
    agent = AgentConfig(kind="external", command=["true"], temperature=0.7, top_p=0.9, max_turn_tokens=20)
    return EpisodeState(Spy(tokenizer, fail), tokenizer, None, agent, seed=5)


def test_the_programs_sampling_is_ignored_and_the_answers_are_serves(smollm2_tokenizer):
    st = _episode(smollm2_tokenizer)
    hi = [{"role": "user", "content": "hi"}]

    async def main():
        async with EpisodeEndpoint(st) as ep:
            client = openai.AsyncOpenAI(base_url=f"{ep.url}/v1", api_key=st.key, max_retries=0)
            r = await client.chat.completions.create(
                model="anything", messages=hi, temperature=0.0, top_p=0.1, seed=1, max_tokens=500, stop=["END"],
                presence_penalty=1.0, logprobs=True,
                extra_body={"top_k": 3, "min_p": 0.2, "repetition_penalty": 1.5, "ignore_eos": True,
                            "return_token_ids": True})
            chunks = [c async for c in await client.chat.completions.create(model="x", messages=hi, stream=True)]
            done = await client.completions.create(model="x", prompt="Say hello", temperature=2.0, max_tokens=3)
            resp = await client.responses.create(model="x", input="hi", temperature=0.0)
            with pytest.raises(openai.BadRequestError, match="one answer per call"):
                await client.chat.completions.create(model="x", messages=hi, n=2)
            return r, chunks, done, resp

    r, chunks, done, resp = asyncio.run(main())
    first = st.client.seen[0]
    assert (first.temperature, first.top_p, first.top_k, first.min_p, first.repetition_penalty, first.presence_penalty,
            first.ignore_eos, first.max_tokens, first.stop, first.seed) == (0.7, 0.9, 0, 0.0, 1.0, 0.0, False, 20,
                                                                            ["END"], 5)
    assert [p.temperature for p in st.client.seen] == [0.7] * 4 and [p.seed for p in st.client.seen] == [5, 6, 7, 8]
    assert done.choices[0].text == "Hello" and st.client.seen[2].max_tokens == 3  # a smaller max_tokens counts
    assert r.object == "chat.completion" and r.choices[0].message.content == "Hello"
    extra = r.choices[0].model_extra
    assert extra["versions"] == [3] * len(extra["token_ids"]) and [t.logprob for t in r.choices[0].logprobs.content] \
        == [-0.5] * len(extra["token_ids"])
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert resp.object == "response" and resp.output_text == "Hello"
    assert st.recorder.stats()["calls"] == 4 and st.engine_error is None


def test_a_policy_failure_is_a_500_and_the_episodes_engine_error(smollm2_tokenizer):
    st = _episode(smollm2_tokenizer, fail=True)

    async def main():
        async with EpisodeEndpoint(st) as ep:
            client = openai.AsyncOpenAI(base_url=f"{ep.url}/v1", api_key=st.key, max_retries=0)
            with pytest.raises(openai.InternalServerError, match="the policy is down"):
                await client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hi"}])
            bad = openai.AsyncOpenAI(base_url=f"{ep.url}/v1", api_key="sk-not-this-one", max_retries=0)
            with pytest.raises(openai.AuthenticationError, match="not this episode's key"):
                await bad.models.list()

    asyncio.run(main())
    assert "the policy is down" in st.engine_error and not st.recorder.calls
