#!/usr/bin/env bash
# Reference figures of docs/evals.md for SmolLM2-135M-Instruct. Every run is resumable: rerun the
# script to continue after an interruption. On a shared 2-core machine it takes hours; the turn
# timeouts are raised so that a slow machine does not turn answers into harness timeouts.
#   - HumanEval greedy pass@1 on the first GREEDY_LIMIT problems (164 = all);
#   - HumanEval sampled pass@1/pass@10 (n=10, temperature 0.8) on HumanEval/0-3 and HumanEval/20-27;
#   - the long-context grid up to ~8K tokens: niah and vartrack at depths 0, 0.5, 1.
set -euo pipefail
cd "$(dirname "$0")/.."
T=".venv/bin/temper eval --model smollm2-135m"
OUT=${OUT:-runs/ref}
SLOW=(--set agent.turn_timeout_s=7200 --set agent.episode_timeout_s=7200 --set engine.kv_budget_bytes=800000000)
$T --suite humaneval --limit "${GREEDY_LIMIT:-164}" --out "$OUT/humaneval-greedy" --concurrency 20 "${SLOW[@]}"
$T --suite humaneval --samples 10 --limit 4 --out "$OUT/humaneval-sampled" --concurrency 20 "${SLOW[@]}"
$T --suite humaneval --samples 10 --set start=20 --limit 8 --out "$OUT/humaneval-sampled-20-27" --concurrency 20 \
  "${SLOW[@]}"
$T --grid --out "$OUT/longctx-grid-final" --set "grid.tasks=[niah,vartrack]" --set "grid.depths=[0,0.5,1]" \
  --set grid.n=2 --set agent.max_turn_tokens=96 "${SLOW[@]}"
