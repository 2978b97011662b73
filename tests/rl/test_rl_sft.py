"""SFT: JSONL validation, assistant-only loss masks, and the documented `temper sft` example."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import make_model

from temper.errors import TemperError
from temper.rl import RLConfig, Trainer
from temper.rl.batching import Sample
from temper.rl.sft import read_chat_jsonl, sft_step, transcript_sample

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "temper", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=240)


def test_bad_jsonl_line_is_one_clear_error(tmp_path):
    data = tmp_path / "chats.jsonl"
    good = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}
    data.write_text(json.dumps(good) + "\n" + '{"messages": [oops\n')
    with pytest.raises(TemperError, match=r"chats.jsonl:2: invalid JSON"):
        read_chat_jsonl(data)
    data.write_text(json.dumps(good) + "\n\n" + json.dumps({"messages": [{"role": "robot", "content": "x"}]}) + "\n")
    with pytest.raises(TemperError, match=r"chats.jsonl:3: messages\[0\] needs a role"):
        read_chat_jsonl(data)
    proc = _cli("sft", "--set", f"data.path={data}", "--out", str(tmp_path / "run"))
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "chats.jsonl:3:" in lines[0], proc.stderr


def test_sft_step_lowers_the_loss_on_demonstrations():
    model = make_model()
    cfg = RLConfig()
    cfg.optim.lr = 3e-3
    tr = Trainer(model, cfg)
    g = torch.Generator().manual_seed(0)
    samples = []
    for _ in range(4):
        tokens = torch.randint(0, 64, (12,), generator=g)
        samples.append(Sample(tokens, torch.tensor([0] * 4 + [1] * 8)))
    losses = [sft_step(tr, samples).loss for _ in range(15)]
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.slow
@pytest.mark.e2e
def test_assistant_mask_covers_exactly_the_assistant_turns(smollm2_tokenizer):
    tok = smollm2_tokenizer
    messages = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "It is 4."},
                {"role": "user", "content": "And 3 + 4?"}, {"role": "assistant", "content": "It is 7."}]
    s = transcript_sample(tok, messages, max_tokens=512)
    full = tok.apply_chat_template(messages, tokenize=True)
    assert s.tokens.tolist() == full  # turn-by-turn tokenisation equals tokenising the whole transcript
    trained = tok.decode([t for t, m in zip(s.tokens.tolist(), s.mask.tolist(), strict=True) if m],
                         skip_special_tokens=False)
    assert "It is 4." in trained and "It is 7." in trained
    assert "2 + 2" not in trained and "3 + 4" not in trained and "user" not in trained


@pytest.mark.slow
@pytest.mark.e2e  # a `temper sft` training run
def test_documented_sft_example_runs(tmp_path):
    """The exact command of docs/rl.md, with the run folder in a temporary directory."""
    doc = (ROOT / "docs" / "rl.md").read_text()
    assert "temper sft --config examples/sft/config.yaml --out runs/sft-example" in doc
    proc = _cli("sft", "--config", "examples/sft/config.yaml", "--out", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 3 and summary["transcripts"] == 17
    assert summary["losses"][-1] < summary["losses"][0]
    assert (Path(summary["model"]) / "model.safetensors").is_file()
    assert (Path(summary["model"]) / "tokenizer.json").is_file()
