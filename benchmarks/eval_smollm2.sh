#!/usr/bin/env bash
# Reference figures of docs/evals.md: SmolLM2-135M-Instruct on HumanEval (greedy pass@1 on all 164
# problems; sampled pass@1/pass@10 with n=10 at temperature 0.8 on the first LIMIT problems) and
# its long-context grid up to ~8K tokens. Resumable: rerun to continue after an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."
T=.venv/bin/temper
OUT=${OUT:-runs/ref}
LIMIT=${LIMIT:-16}
$T eval --model smollm2-135m --suite humaneval --out "$OUT/humaneval-greedy" --concurrency 8
$T eval --model smollm2-135m --grid --out "$OUT/longctx-grid" \
  --set "grid.depths=[0,0.5,1]" --set grid.n=4 --set agent.max_turn_tokens=96
$T eval --model smollm2-135m --suite humaneval --samples 10 --limit "$LIMIT" --out "$OUT/humaneval-sampled" \
  --concurrency 8
