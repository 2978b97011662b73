"""The generation boundary: what a policy is to the agent loop, environments and evaluation.

Plain Python (no torch, no engine): `GenerationClient`, `SamplingParams`, `Completion`,
`RequestError`, the `ChatTokenizer` protocol, and `RemoteClient`, the client of OpenAI-compatible
servers (temper serve, vLLM, SGLang). The engine implements the same protocol in process.
"""

from temper.generation.completion import Completion, TokenEvent
from temper.generation.prices import Prices
from temper.generation.protocol import ChatTokenizer, GenerationClient
from temper.generation.remote_client import RemoteClient, RemoteError, RemoteGenerationConfig, default_served_name
from temper.generation.sampling_params import RequestError, SamplingParams
from temper.generation.structured_outputs import StructuredOutputs

__all__ = ["ChatTokenizer", "Completion", "GenerationClient", "Prices", "RemoteClient", "RemoteError",
           "RemoteGenerationConfig", "RequestError", "SamplingParams", "StructuredOutputs", "TokenEvent",
           "default_served_name"]
