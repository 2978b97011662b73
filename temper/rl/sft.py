"""Supervised fine-tuning on the RL trainer's machinery: a loss on demonstration tokens.

Input: JSONL, one chat transcript per line, `{"messages": [{"role": "user", "content": "..."}, ...]}`.
Each transcript is rendered with the model's chat template and tokenised turn by turn, so the loss
mask covers exactly the assistant turns (or every token with `data.train_on: all`).
"""

import json
import logging
import random
import time
from pathlib import Path
from typing import Any

import torch

from temper.errors import TemperError
from temper.rl.batching import MicroBatch, Sample
from temper.rl.checkpoint import list_checkpoints
from temper.rl.config import RLConfig, SFTConfig
from temper.rl.logprobs import micro_batch_logprobs
from temper.rl.losses import set_loss_weights
from temper.rl.stats import Sums, UpdateStats
from temper.rl.trainer import Trainer

log = logging.getLogger("temper.sft")
ROLES = ("system", "user", "assistant", "tool")


def read_chat_jsonl(path: str | Path) -> list[list[dict[str, Any]]]:
    """Parse and validate every line; the first bad one raises a TemperError naming file:line."""
    path = Path(path)
    if not path.is_file():
        raise TemperError(f"{path}: no such file (data.path)")
    transcripts = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TemperError(f"{path}:{n}: invalid JSON ({exc.msg} at column {exc.colno})") from None
        messages = record.get("messages") if isinstance(record, dict) else None
        if not isinstance(messages, list) or not messages:
            raise TemperError(f"{path}:{n}: expected an object with a non-empty \"messages\" list")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
                raise TemperError(f"{path}:{n}: messages[{i}] needs a role in {ROLES} and a string content")
        if not any(m["role"] == "assistant" for m in messages):
            raise TemperError(f"{path}:{n}: no assistant message to learn from")
        transcripts.append(messages)
    if not transcripts:
        raise TemperError(f"{path}: no transcripts")
    return transcripts


def transcript_sample(tokenizer, messages: list[dict[str, Any]], max_tokens: int, train_on: str = "assistant"
                      ) -> Sample:
    """Token ids of the rendered transcript; loss mask 1 on assistant turns (as the template writes them)."""
    ids: list[int] = []
    mask: list[int] = []
    prev = ""

    def extend(text: str, label: int) -> None:
        nonlocal prev
        if not text.startswith(prev):
            raise TemperError("the chat template does not render transcripts prefix-consistently; "
                              "use data.train_on: all")
        new = tokenizer.encode(text[len(prev):])
        ids.extend(new)
        mask.extend([label] * len(new))
        prev = text

    for k, m in enumerate(messages):
        if m["role"] == "assistant":
            extend(tokenizer.apply_chat_template(messages[:k], add_generation_prompt=True), 0)
        extend(tokenizer.apply_chat_template(messages[:k + 1]), int(m["role"] == "assistant" or train_on == "all"))
    ids, mask = ids[:max_tokens], mask[:max_tokens]
    return Sample(torch.tensor(ids, dtype=torch.long), torch.tensor(mask))


def sft_step(trainer: Trainer, samples: list[Sample]) -> UpdateStats:
    """One optimizer step of token-mean negative log-likelihood on the samples' masked tokens."""
    start = time.perf_counter()
    mbs = trainer.micro_batches(samples)
    set_loss_weights(mbs, len(samples), "token_mean")

    def nll(mb: MicroBatch, sums: Sums) -> torch.Tensor:
        logp, entropy = micro_batch_logprobs(trainer.model, mb, trainer.cfg.trainer.logits_chunk)
        sums.loss_tokens += float(mb.values.keep.sum())
        sums.entropy += float((entropy.detach() * mb.values.keep).sum())
        return -(logp * mb.values.weight).sum()

    sums = Sums()
    trainer.update(mbs, nll, sums)
    return trainer.finish(sums, start)


def run_sft(cfg: SFTConfig, out: str | Path | None = None) -> dict[str, Any]:
    """Train, checkpoint into `out` (resuming from it when it holds a checkpoint), return a summary."""
    from temper.models import load_model
    from temper.runtime import apply_runtime

    device = apply_runtime(cfg.runtime)
    out = Path(out or cfg.out)
    transcripts = read_chat_jsonl(cfg.data.path)  # before the model loads: bad data fails fast
    loaded = load_model(cfg.model, device=device)
    samples = [transcript_sample(loaded.tokenizer, m, cfg.data.max_tokens, cfg.data.train_on) for m in transcripts]
    rl = RLConfig(optim=cfg.optim, trainer=cfg.trainer, checkpoint=cfg.checkpoint)
    trainer = Trainer(loaded.model, rl, pad_id=loaded.tokenizer.pad_token_id)
    cursor = {"epoch": 0, "batch": 0}
    if list_checkpoints(out):
        trainer.load_checkpoint(out)
        cursor = trainer.data_cursor
        log.info("resumed from %s at epoch %d batch %d", out, cursor["epoch"], cursor["batch"])
    history = []
    metrics: dict[str, float] = {}
    for epoch in range(cursor["epoch"], cfg.epochs):
        order = list(range(len(samples)))
        random.Random(cfg.runtime.seed + epoch).shuffle(order)  # the same order again on resume
        batches = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
        start = cursor["batch"] if epoch == cursor["epoch"] else 0
        for b in range(start, len(batches)):
            stats = sft_step(trainer, [samples[i] for i in batches[b]])
            metrics = stats.as_metrics()
            trainer.data_cursor = {"epoch": epoch, "batch": b + 1}
            history.append(stats.loss)
            log.info("sft step %d  loss %.4f  grad_norm %.3f  %.0f tok/s", trainer.step_count, stats.loss,
                     stats.grad_norm, stats.tokens_per_s)
            if cfg.save_every and trainer.step_count % cfg.save_every == 0:
                trainer.save_checkpoint(out, metrics, loaded.tokenizer)
        cursor = {"epoch": epoch + 1, "batch": 0}
        trainer.data_cursor = cursor
    path = trainer.save_checkpoint(out, metrics, loaded.tokenizer)
    return {"steps": trainer.step_count, "losses": history, "checkpoint": str(path),
            "model": str(path / "model"), "transcripts": len(samples)}
