"""Benchmark `temper serve` on SmolLM2-135M-Instruct; the last line printed is JSON.

    .venv/bin/python benchmarks/serve_bench.py [--quick]

In one run, against the same prompts:
  1. standard vs fast variant at concurrency 1 on input-grounded prompts (rewrite, correct, extract):
     output tokens/s ratio (target >= 2x) and whether the greedy texts are identical;
  2. p50/p99 request latency at concurrency 1, 8 and 32 (standard variant);
  3. structured outputs: ms per output token with a JSON schema (response_format) against the
     same requests unconstrained (concurrency 1, greedy), and the difference (`--structured-only`:
     this part alone);
  4. throughput (output tokens/s at concurrency 8) of `temper serve` vs transformers' own
     `transformers serve` on the same model folder, each server alone on the machine (a minimal
     FastAPI wrapper around transformers `generate` stands in if `transformers serve` cannot start).
Both servers run in subprocesses with one torch thread (OMP_NUM_THREADS=1), so figures compare
like with like on a shared 2-core box; absolute numbers are noisy there, ratios are side by side.
"""

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from temper.net import free_port

PASSAGE = ("The Amazon rainforest covers much of the Amazon basin of South America. The basin spans seven "
           "million square kilometres, of which five and a half million are covered by the rainforest. The "
           "region includes territory belonging to nine nations and 3,344 formally acknowledged indigenous "
           "territories.")
CODE = ("def mean(values):\n    total = 0\n    for v in values:\n        total = total + v\n"
        "    return total / len(values)\n")
GROUNDED = [
    f"Repeat the following text exactly, word for word:\n\n{PASSAGE}",
    f"Add type hints to this Python function and write out the whole function:\n\n{CODE}",
    "Fix the spelling mistakes and write the corrected text in full: 'Teh weather in Lodnon is ofen rainy "
    "and grey, but the peple are frendly and the musems are free to vist.'",
    f"Copy the first two sentences of this text:\n\n{PASSAGE}",
    "Rewrite this list in alphabetical order, one item per line: banana, cherry, apple, mango, kiwi, grape, "
    "lemon, orange, peach, plum",
    f"Rename the function to `average` and write out the code again:\n\n{CODE}",
]
MIXED = [*GROUNDED, "What is the capital of France?", "Give me three tips for sleeping better.",
         "Explain what a prime number is.", "Write a haiku about the sea."]


def wait_up(url: str, proc: subprocess.Popen, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if httpx.get(f"{url}/health", timeout=5).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    return False


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


async def chat(client: httpx.AsyncClient, url: str, model: str, prompt: str, max_tokens: int,
               extra: dict | None = None) -> dict:
    start = time.perf_counter()
    r = await client.post(f"{url}/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
        "temperature": 0, **(extra or {})})
    r.raise_for_status()
    data = r.json()
    return {"latency": time.perf_counter() - start, "text": data["choices"][0]["message"]["content"],
            "tokens": data["usage"]["completion_tokens"], "variant": r.headers.get("x-variant")}


async def run_level(url: str, model: str, prompts: list[str], concurrency: int, total: int,
                    max_tokens: int) -> tuple[list[dict], float]:
    """`total` requests, `concurrency` at a time; returns the results and the wall time."""
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=1800, limits=httpx.Limits(max_connections=concurrency + 4)) as client:
        async def one(i: int) -> dict:
            async with sem:
                return await chat(client, url, model, prompts[i % len(prompts)], max_tokens)

        start = time.perf_counter()
        results = await asyncio.gather(*(one(i) for i in range(total)))
        return list(results), time.perf_counter() - start


JSON_PROMPTS = ["Describe a cat as JSON with its name, age and favourite toys.",
                "Give a book as JSON: title, year and three keywords.",
                "A city as JSON: its name, population and two landmarks.",
                "A recipe as JSON: its name, minutes to cook and the main ingredients."]
THING = {"type": "object", "additionalProperties": False, "required": ["name", "number", "items"],
         "properties": {"name": {"type": "string", "maxLength": 60}, "number": {"type": "integer"},
                        "items": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 40}}}}


async def _one_chat(url: str, prompt: str, max_tokens: int, extra: dict | None) -> dict:
    async with httpx.AsyncClient(timeout=1800) as client:
        return await chat(client, url, "smollm2", prompt, max_tokens, extra)


def structured_overhead(url: str, max_tokens: int) -> dict:
    """ms per output token of JSON-schema-constrained requests against the same requests free, at
    concurrency 1, greedy, interleaved (free first for even prompts, constrained first for odd)."""
    fmt = {"response_format": {"type": "json_schema", "json_schema": {"name": "thing", "schema": THING,
                                                                      "strict": True}}}
    # The server's first constrained request builds xgrammar's vocabulary tables and compiles the
    # schema (~0.6 s, once per server and schema): paid here, outside the figures.
    first = asyncio.run(_one_chat(url, JSON_PROMPTS[0], 4, fmt))["latency"]
    tot = {"free": [0.0, 0], "json_schema": [0.0, 0]}
    for i, prompt in enumerate(JSON_PROMPTS):
        order = [("free", None), ("json_schema", fmt)]
        for name, extra in order if i % 2 == 0 else order[::-1]:
            r = asyncio.run(_one_chat(url, prompt, max_tokens, extra))
            tot[name][0] += r["latency"]
            tot[name][1] += r["tokens"]
            if name == "json_schema" and r["tokens"] < max_tokens:
                json.loads(r["text"])  # it parses (unless cut off)
    free_ms, json_ms = (1000 * tot[k][0] / tot[k][1] for k in ("free", "json_schema"))
    return {"first_constrained_request_ms": round(1000 * first, 1), "free_ms_per_token": round(free_ms, 2),
            "json_schema_ms_per_token": round(json_ms, 2),
            "structured_overhead_ms_per_token": round(json_ms - free_ms, 2),
            "structured_vs_free_ratio": round(json_ms / free_ms, 3)}


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def start_temper(folder: Path, tmp: Path, env: dict) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "temper", "serve", "--model", str(folder), "--port", str(port),
                             "--set", "served_name=smollm2", "--set", f"usage.path={tmp / 'usage.jsonl'}",
                             "--set", "queue.max_requests=256"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return proc, f"http://127.0.0.1:{port}"


WRAPPER = r'''
import sys, threading, torch, uvicorn
from fastapi import FastAPI
from transformers import AutoModelForCausalLM, AutoTokenizer
folder, port = sys.argv[1], int(sys.argv[2])
tok = AutoTokenizer.from_pretrained(folder)
model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
lock = threading.Lock()
app = FastAPI()
@app.get("/health")
def health():
    return {"status": "ok"}
@app.post("/v1/chat/completions")
def chat(body: dict):
    ids = tok.apply_chat_template(body["messages"], add_generation_prompt=True, return_tensors="pt",
                                  return_dict=True)
    with lock, torch.no_grad():
        out = model.generate(**ids, max_new_tokens=body.get("max_tokens", 64), do_sample=False)
    new = out[0, ids["input_ids"].shape[1]:]
    return {"choices": [{"message": {"role": "assistant", "content": tok.decode(new, skip_special_tokens=True)}}],
            "usage": {"completion_tokens": int(new.shape[0])}}
uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
'''


def start_transformers(folder: Path, env: dict) -> tuple[subprocess.Popen | None, str, str]:
    """`transformers serve` on the folder, else the minimal FastAPI wrapper around `generate`."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    exe = Path(sys.executable).parent / "transformers"
    if exe.exists():
        proc = subprocess.Popen([str(exe), "serve", str(folder), "--port", str(port), "--host", "127.0.0.1",
                                 "--device", "cpu", "--dtype", "float32"], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait_up(url, proc, 300):
            return proc, url, "transformers serve"
        stop(proc)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, str(folder), str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if wait_up(url, proc, 300):
        return proc, url, "fastapi wrapper around transformers generate"
    stop(proc)
    return None, "", "unavailable"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer and shorter requests (a smoke run)")
    ap.add_argument("--structured-only", action="store_true", help="only the structured-outputs overhead")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results/serve_bench/latest.json")
    args = ap.parse_args()
    from temper.models import resolve_model

    folder = resolve_model("smollm2-135m")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    spec_tokens = 48 if args.quick else 80
    n_c1, n_c8, n_c32, n_tp = (4, 8, 32, 8) if args.quick else (6, 16, 32, 16)
    lat_tokens = 24 if args.quick else 32
    out: dict = {"model": "smollm2-135m", "threads_per_server": 1}
    t_start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp_dir:
        proc, url = start_temper(folder, Path(tmp_dir), env)
        try:
            if not wait_up(url, proc, 600):
                raise SystemExit("temper serve did not start")
            # Warm-up (first-call costs), then standard vs fast, alternating which goes first.
            asyncio.run(run_level(url, "smollm2", GROUNDED[:1], 1, 1, 8))
            out.update(structured_overhead(url, 32 if args.quick else 64))
            print(f"structured outputs: {out['json_schema_ms_per_token']} ms/token with a JSON schema, "
                  f"{out['free_ms_per_token']} free ({out['structured_overhead_ms_per_token']:+} ms)", flush=True)
            if args.structured_only:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps(out, indent=1) + "\n")
                print(json.dumps(out))
                return
            std_tok = std_s = fast_tok = fast_s = 0.0
            identical = True
            for i, prompt in enumerate(GROUNDED):
                order = ["smollm2", "smollm2:fast"] if i % 2 == 0 else ["smollm2:fast", "smollm2"]
                res = {m: asyncio.run(run_level(url, m, [prompt], 1, 1, spec_tokens))[0][0] for m in order}
                s, f = res["smollm2"], res["smollm2:fast"]
                identical &= s["text"] == f["text"] and f["variant"] == "fast"
                std_tok, std_s = std_tok + s["tokens"], std_s + s["latency"]
                fast_tok, fast_s = fast_tok + f["tokens"], fast_s + f["latency"]
                print(f"prompt {i}: standard {s['tokens'] / s['latency']:.1f} tok/s, fast "
                      f"{f['tokens'] / f['latency']:.1f} tok/s, same text: {s['text'] == f['text']}", flush=True)
            out["standard_tokens_per_s_c1"] = round(std_tok / std_s, 2)
            out["fast_tokens_per_s_c1"] = round(fast_tok / fast_s, 2)
            out["fast_vs_standard_ratio"] = round((fast_tok / fast_s) / (std_tok / std_s), 3)
            out["identical_greedy"] = identical
            for c, n in ((1, n_c1), (8, n_c8), (32, n_c32)):
                results, wall = asyncio.run(run_level(url, "smollm2", MIXED, c, n, lat_tokens))
                lats = [r["latency"] for r in results]
                out[f"p50_ms_c{c}"] = round(1000 * pct(lats, 0.5), 1)
                out[f"p99_ms_c{c}"] = round(1000 * pct(lats, 0.99), 1)
                out[f"tokens_per_s_c{c}"] = round(sum(r["tokens"] for r in results) / wall, 2)
                print(f"concurrency {c}: {n} requests, p50 {out[f'p50_ms_c{c}']} ms, p99 {out[f'p99_ms_c{c}']} ms, "
                      f"{out[f'tokens_per_s_c{c}']} tok/s", flush=True)
            results, wall = asyncio.run(run_level(url, "smollm2", MIXED, 8, n_tp, lat_tokens))
            out["temper_tokens_per_s"] = round(sum(r["tokens"] for r in results) / wall, 2)
        finally:
            stop(proc)
    tproc, turl, baseline = start_transformers(folder, env)
    out["baseline"] = baseline
    if tproc is not None:
        try:
            asyncio.run(run_level(turl, str(folder), GROUNDED[:1], 1, 1, 8))  # warm-up
            results, wall = asyncio.run(run_level(turl, str(folder), MIXED, 8, n_tp, lat_tokens))
            out["transformers_tokens_per_s"] = round(sum(r["tokens"] for r in results) / wall, 2)
            out["ratio_vs_transformers"] = round(out["temper_tokens_per_s"] / out["transformers_tokens_per_s"], 3)
        finally:
            stop(tproc)
    else:
        out["transformers_tokens_per_s"] = out["ratio_vs_transformers"] = None
    out["bench_wall_s"] = round(time.monotonic() - t_start, 1)
    out["targets"] = {"fast_vs_standard_ratio>=2": out["fast_vs_standard_ratio"] >= 2.0,
                      "identical_greedy": out["identical_greedy"],
                      "faster_than_transformers": bool(out["ratio_vs_transformers"] and
                                                       out["ratio_vs_transformers"] > 1.0)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
