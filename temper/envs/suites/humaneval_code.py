"""Turning a model's answer to a HumanEval problem into a program that runs the problem's tests.

The answer may be the whole function (in a ```python block or bare) or only its body, as the
original HumanEval completions are; either way the problem's own imports and helpers are kept.
"""

import re

_FENCE = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)

# Runs many programs in one sandbox exec (each in its own process, with its own limits) and
# prints one JSON line per program: batching makes 164 problems one round trip, not 164. The limit
# that fails a program is CPU time (RLIMIT_CPU), which a loaded host does not stretch; the wall
# limit, a multiple of it, only catches programs that sleep or block.
RUNNER = r'''
import json, resource, signal, subprocess, sys
from concurrent.futures import ThreadPoolExecutor
cpu_s, wall_s, workers = (int(a) for a in sys.argv[1:4])
files = sys.argv[4:]
def limit():  # never above the sandbox's own hard limit (raising it would fail)
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    cap = cpu_s + 1 if hard == resource.RLIM_INFINITY else min(cpu_s + 1, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (min(cpu_s, cap), cap))
def run(path):
    try:
        r = subprocess.run([sys.executable, path], capture_output=True, timeout=wall_s, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"file": path, "exit": None, "err": f"timed out after {wall_s}s of wall time"}
    if r.returncode == -signal.SIGXCPU:
        return {"file": path, "exit": None, "err": f"used more than {cpu_s}s of CPU"}
    return {"file": path, "exit": r.returncode, "err": r.stderr.decode(errors="replace")[-500:]}
with ThreadPoolExecutor(workers) as pool:
    for out in pool.map(run, files):
        print(json.dumps(out), flush=True)
'''


def extract_code(answer: str) -> str:
    blocks = _FENCE.findall(answer)
    if blocks:
        return max(blocks, key=len)  # the longest block is the solution, not a usage example
    return answer


def build_program(problem: dict[str, str], answer: str) -> str:
    code = extract_code(answer)
    entry = problem["entry_point"]
    if re.search(rf"^def {re.escape(entry)}\s*\(", code, re.M):
        # A whole function: keep the prompt's preamble (imports, helper functions) before it.
        preamble = problem["prompt"][: problem["prompt"].rfind(f"def {entry}")]
        program = f"{preamble}\n{code}"
    else:
        program = problem["prompt"] + code
    return f"{program}\n\n{problem['test']}\n\ncheck({entry})\n"
