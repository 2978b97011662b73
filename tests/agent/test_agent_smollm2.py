"""A real multi-turn episode: SmolLM2-135M through the real engine (AsyncEngine), tools offered."""

import asyncio

import pytest

from temper.agent import AgentConfig, AgentLoop
from temper.envs import Environment, Observation, Reward, StepResult, Task


class ThreeQuestions(Environment):
    """Asks three short questions in turn; the episode always spans three model turns (or more,
    when the model tries a tool)."""

    tools = ("python",)
    QUESTIONS = ("What is the capital of France?", "Name a colour.", "What is 2 + 3?")

    def __init__(self) -> None:
        super().__init__(Task.make("qa", "chat", self.QUESTIONS[0]))
        self.asked = 1

    async def reset(self) -> Observation:
        return Observation(self.QUESTIONS[0])

    async def step(self, action: str) -> StepResult:
        if self.asked == len(self.QUESTIONS):
            return StepResult(reward=Reward(1.0, {"answered": 3.0}), done=True)
        self.asked += 1
        return StepResult(Observation(self.QUESTIONS[self.asked - 1]))


@pytest.mark.slow
@pytest.mark.e2e
def test_smollm2_multi_turn_episode_through_the_engine(smollm2) -> None:
    from temper.engine import EngineConfig, LLMEngine
    from temper.engine.async_engine import AsyncEngine

    tok = smollm2.tokenizer
    engine = AsyncEngine(LLMEngine(smollm2.model, tok, EngineConfig(max_model_len=2048), version=5))
    cfg = AgentConfig(temperature=0.0, max_consecutive_errors=6, max_turns=5, max_turn_tokens=16,
                      max_context_tokens=2048)
    res = asyncio.run(AgentLoop(engine, tok, cfg).run(ThreeQuestions()))

    assert res.failure is None and len(res.turns) >= 3
    tr = res.trajectory
    decoded = tok.decode(tr.token_ids, skip_special_tokens=False).replace("<|endoftext|>", "")
    assert decoded == tok.apply_chat_template(res.messages).removesuffix("\n")
    for q in ThreeQuestions.QUESTIONS:
        assert q in decoded
    # the loss mask covers exactly the engine's tokens: as many as the turns generated, version 5
    assert tr.num_model_tokens == sum(t.model_tokens for t in res.turns)
    assert {v for v, m in zip(tr.versions, tr.loss_mask, strict=True) if m} == {5}
    assert all(lp < 0 or lp == 0.0 for lp, m in zip(tr.logprobs, tr.loss_mask, strict=True) if m)
    assert any(lp < 0 for lp, m in zip(tr.logprobs, tr.loss_mask, strict=True) if m)
    assert all(t.finish_reason in ("stop", "length") for t in res.turns)
