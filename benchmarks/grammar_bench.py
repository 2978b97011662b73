"""Which grammar library constrains temper's sampling: per-token overhead on this CPU.

    .venv/bin/python benchmarks/grammar_bench.py

llguidance, xgrammar and outlines-core, each on SmolLM2-135M-Instruct's tokenizer (49,152 tokens),
walk the same valid JSON documents token by token: compile the schema once (the tokenizer's
tables, built once per engine, are not counted), then at every token compute the allowed-token
mask into a tensor and advance by the document's next token (what the engine does per sampled
token). Reported: compile ms and mean/p99 microseconds per token, median of 3 repeats; the last
line is JSON, also written to benchmarks/results/grammar_bench/latest.json. Run
`pip install llguidance==1.9.1 outlines-core==0.2.14` first: temper itself depends on xgrammar only
(the fastest here).
"""

import json
import statistics
import time
from pathlib import Path
from typing import Any

import torch
from transformers import AutoTokenizer

from temper.models import resolve_model

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "email": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                    "required": ["city", "zip"], "additionalProperties": False},
        "active": {"type": "boolean"},
    },
    "required": ["name", "age", "email", "tags", "address", "active"],
    "additionalProperties": False,
}
DOCS = [
    {"name": "Ada Lovelace", "age": 36, "email": "ada@example.org", "tags": ["math", "poetry", "engines"],
     "address": {"city": "London", "zip": "W1"}, "active": False},
    {"name": "Grace Hopper", "age": 85, "email": "grace@navy.mil", "tags": ["cobol", "compilers"],
     "address": {"city": "Arlington", "zip": "22201"}, "active": True},
]


def walk(tokens: list[int], step: Any) -> list[float]:
    times = []
    for t in tokens:
        t0 = time.perf_counter()
        step(t)
        times.append(time.perf_counter() - t0)
    return times


def run_llguidance(tok: Any, vocab: int, docs: list[list[int]]) -> tuple[float, list[float]]:
    import llguidance
    import llguidance.hf
    import llguidance.torch as lt

    lltok = llguidance.hf.from_tokenizer(tok, n_vocab=vocab)  # once per engine: not counted
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(SCHEMA))
    llguidance.LLMatcher(lltok, grammar)  # llguidance compiles lazily: the first matcher pays
    compile_s = time.perf_counter() - t0
    mask = lt.allocate_token_bitmask(1, vocab)
    times: list[float] = []
    for ids in docs:
        m = llguidance.LLMatcher(lltok, grammar)

        def step(t: int, m: Any = m) -> None:
            lt.fill_next_token_bitmask(m, mask, 0)
            assert m.consume_token(t), m.get_error()

        times += walk(ids, step)
    return compile_s, times


def run_xgrammar(tok: Any, vocab: int, docs: list[list[int]]) -> tuple[float, list[float]]:
    import xgrammar as xgr

    compiler = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab))  # once per engine
    t0 = time.perf_counter()
    compiled = compiler.compile_json_schema(json.dumps(SCHEMA))
    compile_s = time.perf_counter() - t0
    mask = xgr.allocate_token_bitmask(1, vocab)
    times: list[float] = []
    for ids in docs:
        m = xgr.GrammarMatcher(compiled)

        def step(t: int, m: Any = m) -> None:
            m.fill_next_token_bitmask(mask)
            assert m.accept_token(t)

        times += walk(ids, step)
    return compile_s, times


def run_outlines(tok: Any, vocab: int, docs: list[list[int]]) -> tuple[float, list[float]]:
    from outlines_core import Guide, Index, Vocabulary
    from outlines_core.json_schema import build_regex_from_schema
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    t0 = time.perf_counter()
    eos = tok.eos_token_id
    byte_of = {c: b for b, c in bytes_to_unicode().items()}  # SmolLM2's tokens are GPT-2 byte-level
    by_bytes: dict[bytes, list[int]] = {}
    for text, i in tok.get_vocab().items():
        if i != eos and text not in tok.all_special_tokens:
            by_bytes.setdefault(bytes(byte_of[c] for c in text), []).append(i)
    index = Index(build_regex_from_schema(json.dumps(SCHEMA)), Vocabulary(eos, by_bytes))
    compile_s = time.perf_counter() - t0
    mask = torch.zeros((vocab + 31) // 32, dtype=torch.int32)
    times: list[float] = []
    for ids in docs:
        g = Guide(index)

        def step(t: int, g: Any = g) -> None:
            g.write_mask_into(mask.data_ptr(), mask.numel(), mask.element_size())
            if t != eos:  # a finished guide has no state to advance to: EOS only ends it
                g.advance(t)

        times += walk(ids, step)
    return compile_s, times


def main() -> None:
    torch.set_num_threads(1)
    tok = AutoTokenizer.from_pretrained(resolve_model("smollm2-135m"))
    vocab = len(tok)
    docs = [[*tok.encode(json.dumps(d), add_special_tokens=False), tok.eos_token_id] for d in DOCS]
    results: dict[str, Any] = {"tokens_per_repeat": sum(map(len, docs)), "vocab": vocab}
    for name, fn in [("llguidance", run_llguidance), ("xgrammar", run_xgrammar), ("outlines_core", run_outlines)]:
        repeats = []
        for _ in range(3):
            try:
                compile_s, times = fn(tok, vocab, docs)
            except Exception as e:  # a library that cannot walk the documents is reported, not fatal
                results[name] = {"error": f"{type(e).__name__}: {e}"}
                break
            us = sorted(t * 1e6 for t in times)
            repeats.append({"compile_ms": compile_s * 1e3, "mean_us_per_token": statistics.fmean(us),
                            "p99_us_per_token": us[int(0.99 * (len(us) - 1))]})
        if repeats:
            results[name] = {k: round(statistics.median(r[k] for r in repeats), 1) for k in repeats[0]}
        print(name, results[name], flush=True)
    ok = {k: v for k, v in results.items() if isinstance(v, dict) and "mean_us_per_token" in v}
    results["fastest_per_token"] = min(ok, key=lambda k: ok[k]["mean_us_per_token"]) if ok else None
    out = Path(__file__).parent / "results/grammar_bench/latest.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
