"""The rollout engine: paged KV cache, prefix caching, continuous batching, speculative decoding.

    engine = LLMEngine(model, tokenizer, EngineConfig())
    completions = engine.generate(prompts, SamplingParams(temperature=1.0, n=8))
"""

from temper.engine.async_engine import AsyncEngine
from temper.engine.config import EngineConfig, SpeculativeConfig
from temper.engine.llm_engine import LLMEngine
from temper.generation.completion import Completion, TokenEvent
from temper.generation.protocol import GenerationClient
from temper.generation.sampling_params import RequestError, SamplingParams

__all__ = ["AsyncEngine", "Completion", "EngineConfig", "GenerationClient", "LLMEngine", "RequestError",
           "SamplingParams", "SpeculativeConfig", "TokenEvent"]
