"""The reference decoding loop and the `temper generate` command."""

import subprocess
import sys

import pytest
import torch
from typer.testing import CliRunner

from temper.cli import generate as generate_cli
from temper.cli.main import app
from temper.models import generate_reference, save_model


def _full_recompute_greedy(model, ids: list[int], n: int) -> list[int]:
    ids = list(ids)
    with torch.no_grad():
        for _ in range(n):
            ids.append(int(model.logits(torch.tensor(ids))[-1].argmax()))
    return ids[-n:]


@pytest.mark.parametrize("arch", ["llama", "qwen3", "mistral"])  # mistral: a 16-token sliding window
def test_kv_cache_matches_full_recompute(tiny_llama, arch):
    model = tiny_llama(arch)
    prompt = list(range(100, 120))
    assert generate_reference(model, prompt, 24) == _full_recompute_greedy(model, prompt, 24)


def test_stops_after_eos_and_includes_it(tiny_llama):
    model = tiny_llama()
    free = generate_reference(model, [5, 6, 7], 10)
    stop = free[3]
    out = generate_reference(model, [5, 6, 7], 10, eos_ids={stop})
    assert out == free[: free.index(stop) + 1]


def test_sampling_is_seeded(tiny_llama):
    model = tiny_llama()  # random tied embeddings make its logits peaked: sample hot to see variety
    a = generate_reference(model, [1, 2, 3], 12, temperature=100.0, seed=7)
    assert a == generate_reference(model, [1, 2, 3], 12, temperature=100.0, seed=7)
    assert a != generate_reference(model, [1, 2, 3], 12, temperature=100.0, seed=8)
    greedy = generate_reference(model, [1, 2, 3], 12)
    assert generate_reference(model, [1, 2, 3], 12, temperature=1.0, seed=3, top_k=1) == greedy
    assert generate_reference(model, [1, 2, 3], 12, temperature=1.0, seed=3, top_p=1e-6) == greedy


@pytest.fixture
def tiny_folder(tiny_llama, smollm2_tokenizer, tmp_path):
    return save_model(tiny_llama(), smollm2_tokenizer, tmp_path / "tiny")


def test_config_file_then_set_then_flags(tiny_folder, tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(generate_cli, "complete", lambda cfg: seen.append(cfg) or "done")
    cfg_file = tmp_path / "gen.yaml"
    cfg_file.write_text(f"model: {tiny_folder}\nprompt: from the file\nsampling:\n  max_tokens: 3\n  top_k: 5\n")
    result = CliRunner().invoke(app, ["generate", "--config", str(cfg_file), "--set", "sampling.max_tokens=4",
                                      "--set", "sampling.temperature=0.5", "--temperature", "0.7", "--seed", "9"])
    assert result.exit_code == 0, result.output
    cfg = seen[0]
    assert (cfg.prompt, cfg.sampling.max_tokens, cfg.sampling.top_k) == ("from the file", 4, 5)
    assert cfg.sampling.temperature == 0.7 and cfg.runtime.seed == 9
    CliRunner().invoke(app, ["generate", "--config", str(cfg_file), "--prompt", "yes", "--chat"])
    assert seen[1].prompt == "yes" and seen[1].chat  # a text flag stays text (YAML would read True)


def test_generate_prints_the_completion(tiny_folder):
    argv = ["generate", "--model", str(tiny_folder), "--prompt", "Once upon a time", "--max-tokens", "6"]
    first = CliRunner().invoke(app, argv)
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() and first.stdout == CliRunner().invoke(app, argv).stdout  # greedy: repeatable


@pytest.mark.slow
@pytest.mark.e2e
def test_readme_command_answers(tmp_path):
    """README's first command (after setup): the bundled model answers a chat question."""
    proc = subprocess.run(
        [sys.executable, "-m", "temper", "generate", "--model", "smollm2-135m", "--chat",
         "--prompt", "What is the capital of France?", "--max-tokens", "32"],
        capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Paris" in proc.stdout
