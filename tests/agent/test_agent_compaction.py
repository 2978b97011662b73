"""Compaction strategies on a long session whose history outgrows the budget: observation masking keeps every
reply of the agent verbatim and masks only old records (summarising the oldest turns only when even that does
not fit); a summary keeps a line per turn; the model summarizer asks the policy, whose summary lands in the next
window but in no trajectory. The budget holds in every case."""

import asyncio

import pytest

from temper.agent import AgentConfig, AgentLoop, ContextConfig
from temper.agent.model_summary import INSTRUCTION
from temper.envs import parse_spec

SUITE = "session:task=recall,turns=8,record=120,n=1,haystack=generated"
BUDGET = 1024


def _reply(i: int, words: int = 0) -> str:
    # the first line is what an extractive summary keeps; the second only survives verbatim
    return f"Noted.\nfact-{i}-kept" + "".join(f" w{j}" for j in range(words))


def _run(client, tok, compaction: str, summarizer: str = "extractive", budget: int = BUDGET):
    suite = parse_spec(SUITE)
    cfg = AgentConfig(max_turns=12, max_context_tokens=budget, max_turn_tokens=96,
                      context=ContextConfig(compaction=compaction, summarizer=summarizer, summary_max_tokens=64))
    res = asyncio.run(AgentLoop(client, tok, cfg).run(suite.make_env(suite.tasks()[0])))
    texts = [tok.decode(ids, skip_special_tokens=False) for ids, _ in client.requests]
    for ids, params in client.requests:
        assert len(ids) + params.max_tokens <= budget
    return res, texts


def test_observation_masking_keeps_every_reply_and_masks_old_records(scripted, smollm2_tokenizer):
    client = scripted(["ready"] + [_reply(i) for i in range(1, 9)] + ["<answer>0</answer>"])
    res, texts = _run(client, smollm2_tokenizer, "observation_masking")
    assert res.failure is None and len(res.trajectories) > 1  # compacted into new windows
    last = texts[-1]
    assert all(f"fact-{i}-kept" in last for i in range(1, 9))  # every reply, verbatim, in the last window
    assert "[earlier output omitted" in last and "Record 1 of 8" not in last and "A session of 8 records" in last
    assert "Summary of your earlier turns" not in last  # masked turns fit: nothing had to be summarised
    assert "That was the last record." in last


def test_a_summary_keeps_a_line_per_turn_instead(scripted, smollm2_tokenizer):
    client = scripted(["ready"] + [_reply(i) for i in range(1, 9)] + ["<answer>0</answer>"])
    res, texts = _run(client, smollm2_tokenizer, "summary")
    last = texts[-1]
    assert len(res.trajectories) > 1 and "Summary of your earlier turns" in last and "turn 2: Noted." in last
    assert "fact-1-kept" not in last and "[earlier output omitted" not in last


def test_masking_summarises_the_oldest_turns_when_even_masked_ones_do_not_fit(scripted, smollm2_tokenizer):
    client = scripted(["ready"] + [_reply(i, words=60) for i in range(1, 9)] + ["<answer>0</answer>"])
    res, texts = _run(client, smollm2_tokenizer, "observation_masking")
    assert res.failure is None and len(res.trajectories) > 1
    both = [t for t in texts if "Summary of your earlier turns" in t and "[earlier output omitted" in t]
    assert both  # the oldest summarised, the newer ones still there with their records masked
    assert "fact-1-kept" not in texts[-1] and "fact-7-kept" in texts[-1]


class SummarizingClient:
    """The scripted policy, plus a summary whenever it is asked for one (and a record of those requests)."""

    def __init__(self, inner, tok):
        self.inner, self.tok, self.summary_requests = inner, tok, []
        self.requests = inner.requests

    async def generate(self, token_ids, params):
        prompt = self.tok.decode(token_ids)
        if INSTRUCTION in prompt:
            self.summary_requests.append((prompt, params))
            n = len(self.summary_requests)
            self.inner.turns.insert(0, f"MODEL SUMMARY {n}: fact-1-kept")
        return await self.inner.generate(token_ids, params)


@pytest.mark.parametrize("compaction", ["summary", "observation_masking"])
def test_the_model_summarizer_asks_the_policy_and_its_summary_is_never_trained_on(scripted, smollm2_tokenizer,
                                                                                   compaction):
    turns = ["ready"] + [_reply(i, words=60) for i in range(1, 9)] + ["<answer>0</answer>"]
    client = SummarizingClient(scripted(turns), smollm2_tokenizer)
    res, texts = _run(client, smollm2_tokenizer, compaction, summarizer="model")
    assert client.summary_requests, "no summary was asked of the model"
    prompt, params = client.summary_requests[0]
    assert "Turn 1. You wrote: ready" in prompt and "Record 1 of 8" in prompt  # it reads the turns it replaces
    assert params.temperature == 0.0 and params.max_tokens <= 64
    windows = len(res.trajectories)
    assert len(client.summary_requests) <= windows - 1  # one generation per compaction, not one per shape tried
    assert any("MODEL SUMMARY 1" in t for t in texts if INSTRUCTION not in t)  # it lands in a later window
    # a summary is generated outside every trajectory: the trajectories hold exactly the turns' tokens
    assert sum(t.num_model_tokens for t in res.trajectories) == sum(r.model_tokens for r in res.turns)
    trained = [smollm2_tokenizer.decode([i for i, m in zip(t.token_ids, t.loss_mask, strict=True) if m])
               for t in res.trajectories]
    assert not any("MODEL SUMMARY" in t for t in trained) and any("fact-1-kept" in t for t in trained)
