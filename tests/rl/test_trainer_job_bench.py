"""benchmarks/trainer_job_bench.py's floor arithmetic: a group's prompt forwarded once saves exactly the prompt's
work for every other sample (its linear layers and its causal attention), and the LM head counts only the
positions that predict a reply token."""

import sys
from pathlib import Path
from types import SimpleNamespace

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))
import trainer_job_bench as bench  # noqa: E402

# SmolLM2-135M's shape
CFG = SimpleNamespace(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                      num_key_value_heads=3, vocab_size=49152)


def test_a_shared_prompt_saves_its_own_work_once_per_other_sample():
    prompt, rests = 40, [6, 9, 24, 12]
    shared = bench.forward_flops(CFG, [(prompt, rests)], predicting=sum(rests))
    unshared = bench.forward_flops(CFG, [(0, [prompt + r]) for r in rests], predicting=sum(rests))
    d, layers, kv = 576, 30, 3 * 64
    per_token = 2 * layers * (2 * d * d + 2 * d * kv + 3 * d * 1536)
    prompt_work = per_token * prompt + 4 * layers * d * prompt * (prompt + 1) // 2
    assert unshared - shared == (len(rests) - 1) * prompt_work


def test_the_lm_head_counts_the_predicting_positions_only():
    a = bench.forward_flops(CFG, [(0, [50])], predicting=10)
    b = bench.forward_flops(CFG, [(0, [50])], predicting=11)
    assert b - a == 2 * 576 * 49152
