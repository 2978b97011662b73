"""Live `temper serve` servers for tests: a real uvicorn on 127.0.0.1 (a free port) in a thread,
always shut down, plus tiny model folders served through the same load path as real ones."""

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import torch
import uvicorn

from temper.engine import EngineConfig, SpeculativeConfig
from temper.models import LlamaForCausalLM, ModelConfig, save_model
from temper.net import free_port
from temper.serve.app import create_app
from temper.serve.config import ServeConfig

TINY = dict(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, max_position_embeddings=512, rope_theta=10000.0,
            tie_word_embeddings=True, bos_token_id=1, eos_token_id=2, architecture="LlamaForCausalLM",
            model_type="llama")


def tiny_folder(folder: Path, tokenizer: Any, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    model = LlamaForCausalLM(ModelConfig(**TINY)).eval()
    with torch.no_grad():
        # Small embeddings: the layers, not a tied embedding's self-similarity, pick the next token
        # (otherwise every seed just repeats the last prompt token).
        model.model.embed_tokens.weight.mul_(0.02)
    return save_model(model, tokenizer, folder)


def scripted_folder(folder: Path, tokenizer: Any, after: str, text: str, end: str = "<|im_end|>") -> Path:
    """A tiny model that, greedily, answers `text` then `end` once it sees the token `after`.

    Attention and MLP outputs are zero, so the last hidden state is the last token's embedding:
    a bigram model. Each scripted token gets its own embedding direction, and the LM head maps it
    to the next scripted token. The script's tokens must be distinct (a bigram has no memory)."""
    ids = tokenizer.encode(text)
    chain = [tokenizer.encode(after)[-1], *ids, tokenizer.token_to_id(end)]
    if len(set(chain[:-1])) != len(chain) - 1:
        raise ValueError(f"scripted text repeats a token: {[tokenizer.decode([i]) for i in chain]}")
    cfg = ModelConfig(**{**TINY, "tie_word_embeddings": False})
    model = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                p.zero_()
        model.model.embed_tokens.weight.zero_()
        model.lm_head.weight.zero_()
        for k, (src, dst) in enumerate(itertools.pairwise(chain)):
            model.model.embed_tokens.weight[src, k] = 1.0
            model.lm_head.weight[dst, k] = 10.0
    return save_model(model, tokenizer, folder)


ADMIN_TOKEN = "operator-token-for-tests"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}  # the operator's headers


def serve_config(model: Path | str, tmp: Path, weights_dirs: list[Path] | None = None, **over: Any) -> ServeConfig:
    """A tiny server's config; with `weights_dirs`, the operator's routes are on (token ADMIN_TOKEN, in a
    file under `tmp`) and weights load from those folders."""
    data: dict[str, Any] = {
        "model": str(model), "served_name": "tiny",
        "engine": EngineConfig(kv_budget_bytes=64 * 1024**2, max_num_seqs=64,
                               speculative=SpeculativeConfig(method="ngram")).model_dump(),
        "usage": {"path": str(tmp / "usage.jsonl")},
    }
    if weights_dirs is not None:
        (tmp / "admin-token").write_text(ADMIN_TOKEN + "\n")
        data.update(admin_token_file=str(tmp / "admin-token"), weights_dirs=[str(d) for d in weights_dirs])
    for key, value in over.items():  # dotted keys, like --set
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return ServeConfig.from_recipe(data)


class LiveServer:
    """`with LiveServer(cfg) as srv:` -> srv.url (http://127.0.0.1:PORT); shut down on exit."""

    def __init__(self, cfg: ServeConfig, grace_s: int = 5):
        self.cfg = cfg
        self.app = create_app(cfg)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    timeout_graceful_shutdown=grace_s))
        self.thread = threading.Thread(target=self.server.run, name="test-uvicorn", daemon=True)

    def __enter__(self) -> "LiveServer":
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def engine(self) -> Any:
        return self.app.state.server.variants.engine

    def client(self, **kw: Any) -> Any:
        import openai

        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=kw.pop("api_key", "sk-test-key"),
                             max_retries=kw.pop("max_retries", 0), timeout=kw.pop("timeout", 120), **kw)


def metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample in a Prometheus exposition (0.0 when absent)."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        if head == name or head == f"{name}{{{want}}}" or (want and head.startswith(name + "{") and
                                                           all(f'{k}="{v}"' in head for k, v in labels.items())):
            return float(value)
    return 0.0


async def until_running(http: httpx.AsyncClient, request: asyncio.Future, timeout: float = 30.0) -> None:
    """Wait until the server's engine runs a sequence, polling its metrics on the loop that sends `request` (a
    blocking poll starves that loop). Fails at once if `request` ended first (too short a request to act on
    while it runs) and after `timeout`: never an endless poll."""
    deadline = time.monotonic() + timeout
    while metric((await http.get("/metrics")).text, "temper_engine_running_sequences") < 1:
        assert not request.done(), "the request ended before it was seen running"
        assert time.monotonic() < deadline, f"no sequence ran within {timeout:.0f} s"
        await asyncio.sleep(0.005)

