"""lm-eval (`lm-eval[api]`, its `local-completions` model) against a live temper serve: a
multiple-choice (loglikelihood) task and a generate task, both written here as local files, with the
remote tokenizer (/tokenizer_info, /tokenize, /detokenize). The loglikelihoods lm-eval reads back
equal the model's own scoring of the same continuations."""

import json
from pathlib import Path

import pytest
import torch

from temper.models import Tokenizer, load_model

pytestmark = [pytest.mark.timeout(300), pytest.mark.e2e]

MC = [{"question": "Is the sky blue", "choices": ["yes", "no"], "answer": 0},
      {"question": "Two plus two", "choices": ["four", "five", "six"], "answer": 0},
      {"question": "Cats bark", "choices": ["true", "false"], "answer": 1}]
GEN = [{"prompt": "Once upon a time", "target": "x"}, {"prompt": "The capital of France is", "target": "y"}]


def write_tasks(folder: Path) -> None:
    (folder / "mc.jsonl").write_text("".join(json.dumps(d) + "\n" for d in MC))
    (folder / "gen.jsonl").write_text("".join(json.dumps(d) + "\n" for d in GEN))
    (folder / "temper_mc.yaml").write_text(f"""task: temper_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder / 'mc.jsonl'}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}?\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
""")
    (folder / "temper_gen.yaml").write_text(f"""task: temper_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {folder / 'gen.jsonl'}
test_split: test
output_type: generate_until
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{target}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 6
  temperature: 0
metric_list:
  - metric: exact_match
""")


def loglikelihood(model, tok: Tokenizer, context: str, continuation: str) -> float:
    ctx, cont = tok.encode(context), tok.encode(continuation)
    ids = ctx + cont
    with torch.no_grad():
        logp = model.logits(torch.tensor([ids]))[0].float().log_softmax(-1)
    return sum(float(logp[len(ctx) + j - 1, t]) for j, t in enumerate(cont))


def test_lm_eval_multiple_choice_and_generate_tasks(live, tiny_model_dir, tmp_path):
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    write_tasks(tmp_path)
    out = simple_evaluate(
        model="local-completions",
        model_args=f"base_url={live.url}/v1/completions,model=tiny,tokenizer_backend=remote,num_concurrent=1,"
                   "max_retries=1",
        tasks=["temper_mc", "temper_gen"], task_manager=TaskManager(include_path=str(tmp_path)),
        log_samples=True, limit=None)
    assert out["results"]["temper_mc"]["acc,none"] in (0.0, 1 / 3, 2 / 3, 1.0)
    model, tok = load_model(str(tiny_model_dir)).model, Tokenizer.from_folder(tiny_model_dir)
    checked = 0
    for sample in out["samples"]["temper_mc"]:
        for (context, continuation), resp in zip(sample["arguments"], sample["resps"], strict=True):
            ours = loglikelihood(model, tok, context, continuation)
            assert float(resp[0][0]) == pytest.approx(ours, abs=1e-3), (context, continuation)
            checked += 1
    assert checked == 7  # every choice of every question was scored through echo
    client = live.client()
    for sample in out["samples"]["temper_gen"]:
        ref = client.completions.create(model="tiny", prompt=sample["arguments"][0][0], max_tokens=6, temperature=0,
                                        stop=["\n"]).choices[0].text
        assert sample["resps"][0][0] == ref
