"""`temper generate`: complete one prompt with a model and print the completion.

Decoding goes through the rollout engine (`temper.engine`), the same path RL rollouts take.
"""

import logging
import time
from typing import Annotated

import typer
from pydantic import Field

from temper.cli.common import ConfigOption, PrintConfigOption, SetOption, print_config, resolve_config
from temper.config import ConfigModel
from temper.errors import TemperError
from temper.runtime import RuntimeConfig, apply_runtime, resolve_device

log = logging.getLogger("temper.generate")


class SamplingConfig(ConfigModel):
    max_tokens: int = Field(128, ge=1)
    temperature: float = Field(0.0, ge=0.0)  # 0 = greedy
    top_k: int = Field(0, ge=0)  # 0 = no top-k cut
    top_p: float = Field(1.0, gt=0.0, le=1.0)


class GenerateConfig(ConfigModel):
    model: str = "smollm2-135m"  # a bundled name, a local HF folder or GGUF file, or a Hub id
    prompt: str = ""
    chat: bool = False  # wrap the prompt in the model's chat template as one user turn
    system: str | None = None  # a system message, with --chat
    sampling: SamplingConfig = SamplingConfig()
    runtime: RuntimeConfig = RuntimeConfig()  # runtime.seed also seeds sampling; runtime.device: where it runs


def complete(cfg: GenerateConfig) -> str:
    from temper.engine import EngineConfig, LLMEngine
    from temper.generation import SamplingParams
    from temper.models import load_model

    start = time.perf_counter()
    device = resolve_device(cfg.runtime.device)
    loaded = load_model(cfg.model, device=device)
    tok = loaded.tokenizer
    log.info("loaded %s on %s in %.1f s", cfg.model, device, time.perf_counter() - start)
    if cfg.chat:
        messages = [{"role": "system", "content": cfg.system}] if cfg.system else []
        messages.append({"role": "user", "content": cfg.prompt})
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    else:
        ids = tok.encode(cfg.prompt, add_special_tokens=True)
    s = cfg.sampling
    start = time.perf_counter()
    engine = LLMEngine(loaded.model, tok, EngineConfig(seed=cfg.runtime.seed))
    params = SamplingParams(temperature=s.temperature, max_tokens=s.max_tokens, top_k=s.top_k, top_p=s.top_p,
                            seed=cfg.runtime.seed)
    completion = engine.generate([ids], params)[0]
    if completion.error:
        raise TemperError(completion.error)
    out = completion.token_ids
    seconds = time.perf_counter() - start
    log.info("%d prompt + %d new tokens in %.1f s (%.1f tokens/s)", len(ids), len(out), seconds,
             len(out) / max(seconds, 1e-9))
    return tok.decode(out, skip_special_tokens=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def generate(
        config: ConfigOption = None,
        sets: SetOption = None,
        model: Annotated[str | None, typer.Option("--model", "-m", help="Bundled name, folder, GGUF file or Hub id.",
                                                  show_default=False)] = None,
        prompt: Annotated[str | None, typer.Option("--prompt", "-p", help="The prompt text.",
                                                   show_default=False)] = None,
        chat: Annotated[bool | None, typer.Option("--chat/--no-chat", help="Use the model's chat template.",
                                                  show_default=False)] = None,
        system: Annotated[str | None, typer.Option("--system", help="System message (with --chat).",
                                                   show_default=False)] = None,
        max_tokens: Annotated[int | None, typer.Option("--max-tokens", help="Most new tokens.",
                                                       show_default=False)] = None,
        temperature: Annotated[float | None, typer.Option("--temperature", help="0 = greedy.",
                                                          show_default=False)] = None,
        seed: Annotated[int | None, typer.Option("--seed", help="Sampling seed.", show_default=False)] = None,
        device: Annotated[str | None, typer.Option("--device", help="auto, cpu, cuda or cuda:N (runtime.device).",
                                                   show_default=False)] = None,
        show: PrintConfigOption = False,
    ) -> None:
        """Complete a prompt with a model and print the completion (the prompt is not repeated)."""
        cfg = resolve_config(GenerateConfig, config, sets, {
            "model": model, "prompt": prompt, "system": system, "chat": chat, "sampling.max_tokens": max_tokens,
            "sampling.temperature": temperature, "runtime.seed": seed, "runtime.device": device})
        if show:
            print_config(cfg)
        if not cfg.prompt:
            raise TemperError("no prompt: pass --prompt TEXT (or set `prompt` in the config)")
        apply_runtime(cfg.runtime)
        typer.echo(complete(cfg))
