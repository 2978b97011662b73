"""Scoring a prompt on /v1/completions: OpenAI's `echo` (also with `max_tokens: 0`) with
the prompt's logprobs in the legacy shape (the first one null), and vLLM's `prompt_logprobs`; the
values are the model's own log-softmax at each position (what lm-eval's loglikelihood sums)."""

import openai
import pytest
import torch

from temper.models import load_model

pytestmark = pytest.mark.e2e

PROMPT = [1, 504, 2113, 314, 260, 3529, 30, 1023]


def model_scores(folder, ids: list[int]) -> list[float]:
    model = load_model(str(folder)).model
    with torch.no_grad():
        logp = model.logits(torch.tensor([ids]))[0].float().log_softmax(-1)
    return [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]


def test_echo_with_max_tokens_0_scores_the_prompt(live, tiny_model_dir):
    client = live.client()
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=0, echo=True, logprobs=1, temperature=0)
    lp = r.choices[0].logprobs
    assert r.choices[0].text == live.engine.tokenizer.decode(PROMPT, skip_special_tokens=False)
    assert len(lp.tokens) == len(PROMPT) and lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.token_logprobs[1:] == pytest.approx(model_scores(tiny_model_dir, PROMPT), abs=1e-4)
    assert r.usage.completion_tokens == 0 and r.choices[0].finish_reason == "length"


def test_echo_with_a_generated_token_puts_the_prompt_first(live, tiny_model_dir):
    client = live.client()
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=1, echo=True, logprobs=1, temperature=0)
    lp = r.choices[0].logprobs
    assert len(lp.token_logprobs) == len(PROMPT) + 1  # lm-eval slices [ctxlen:-1] of exactly this
    assert lp.token_logprobs[1:len(PROMPT)] == pytest.approx(model_scores(tiny_model_dir, PROMPT), abs=1e-4)
    greedy = max(lp.top_logprobs[-1].values())
    assert lp.token_logprobs[-1] == pytest.approx(greedy, abs=1e-5)
    plain = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=1, temperature=0)
    assert r.choices[0].text.endswith(plain.choices[0].text)


def test_vllm_prompt_logprobs_and_refusals(live, tiny_model_dir):
    client = live.client()
    r = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=1, extra_body={"prompt_logprobs": 2})
    pl = r.choices[0].model_extra["prompt_logprobs"]  # a vLLM field: the client keeps it as an extra
    assert pl[0] is None and len(pl) == len(PROMPT)
    scores = model_scores(tiny_model_dir, PROMPT)
    for i, entry in enumerate(pl[1:], 1):
        assert entry[str(PROMPT[i])]["logprob"] == pytest.approx(scores[i - 1], abs=1e-4)
        assert 1 <= len(entry) <= 3  # the token and up to 2 alternatives
    with pytest.raises(openai.BadRequestError, match="max_tokens: 0 needs echo"):
        client.completions.create(model="tiny", prompt=PROMPT, max_tokens=0)
