"""The TRL side of benchmarks/main_job_bench.py: Hugging Face TRL's GRPOTrainer on the job it is given.

Runs in its own venv (.venv-trl: trl and torch==2.13.0, nothing of temper), so it imports only TRL, transformers,
datasets and the standard library. argv: a JSON spec written by main_job_bench.py (the model folder, the prompts as
chat messages in training order with their answers, the matched settings, the output folder). It writes
OUT/trl.json (per-step wall-clock times, every completion with its reward, the prompt token ids TRL generated from)
and the trained model to OUT/model.

The reward is the rule temper's arithmetic suite scores with, `lenient_number` of temper/envs/answer.py (standard
library only), loaded by its path because this venv has no temper; main_job_bench.py also rescores every completion
with temper's own verifier and fails if one differs.
"""

import importlib.util
import json
import sys
import time
from pathlib import Path

_ANSWER = Path(__file__).resolve().parents[1] / "temper" / "envs" / "answer.py"
_spec = importlib.util.spec_from_file_location("temper_answer", _ANSWER)
_answer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_answer)
lenient_number = _answer.lenient_number


def main(spec_path: str) -> None:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    s = spec["settings"]
    torch.set_num_threads(s["threads"])
    torch.manual_seed(s["seed"])
    scored: list[dict] = []

    def correctness(completions: list, answer: list, **_: object) -> list[float]:
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        rewards = [float(lenient_number(t) == str(a)) for t, a in zip(texts, answer, strict=True)]
        scored.extend({"text": t, "answer": str(a), "reward": r}
                      for t, a, r in zip(texts, answer, rewards, strict=True))
        return rewards

    times: list[float] = []

    class Clock(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            times.append(time.monotonic())

        def on_step_end(self, args, state, control, **kw):
            times.append(time.monotonic())

    config = GRPOConfig(
        output_dir=str(out / "trainer"), max_steps=s["steps"], learning_rate=s["lr"], lr_scheduler_type="constant",
        warmup_steps=0, weight_decay=0.0, adam_beta1=s["betas"][0], adam_beta2=s["betas"][1], adam_epsilon=s["eps"],
        max_grad_norm=s["grad_clip"], per_device_train_batch_size=s["group_size"] * s["prompts_per_step"],
        gradient_accumulation_steps=1, num_generations=s["group_size"], max_completion_length=s["max_tokens"],
        temperature=s["temperature"], top_p=s["top_p"], beta=s["kl_coef"], epsilon=s["clip_low"],
        epsilon_high=s["clip_high"], loss_type="dapo", scale_rewards="group", num_iterations=1,
        shuffle_dataset=False, seed=s["seed"], data_seed=s["seed"], use_cpu=True, bf16=False, fp16=False,
        report_to=[], logging_steps=1, save_strategy="no", disable_dropout=True, dataloader_num_workers=0,
        gradient_checkpointing=s["gradient_checkpointing"],
    )
    rows = [{"prompt": p["messages"], "answer": p["answer"]} for p in spec["prompts"]]
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(spec["model"])
    trainer = GRPOTrainer(model=model, reward_funcs=correctness, args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, callbacks=[Clock()])
    # the ids TRL itself generates from (its own tokenisation path), for the bench's token-identity check
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows[: spec["check_prompts"]]])
    trainer.train()
    trainer.save_model(str(out / "model"))
    tokenizer.save_pretrained(str(out / "model"))
    (out / "trl.json").write_text(json.dumps({
        "step_end_s": [t - times[0] for t in times[1:]], "completions": scored,
        "prompt_ids": [list(map(int, ids)) for ids in prompt_ids], "log": trainer.state.log_history,
        "versions": {"trl": __import__("trl").__version__, "torch": torch.__version__,
                     "transformers": __import__("transformers").__version__},
    }))


if __name__ == "__main__":
    main(sys.argv[1])
