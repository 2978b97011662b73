"""The rollout engine: paged KV cache, prefix caching, continuous batching, speculative decoding.
It speaks temper.generation (SamplingParams in, Completion out; AsyncEngine is a GenerationClient).

    engine = LLMEngine(model, tokenizer, EngineConfig())
    completions = engine.generate(prompts, SamplingParams(temperature=1.0, n=8))
"""

from temper.engine.async_engine import AsyncEngine
from temper.engine.config import EngineConfig, SpeculativeConfig
from temper.engine.llm_engine import LLMEngine

__all__ = ["AsyncEngine", "EngineConfig", "LLMEngine", "SpeculativeConfig"]
