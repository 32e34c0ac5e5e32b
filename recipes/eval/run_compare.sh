#!/usr/bin/env bash
# The paper-style comparison of every method (mean ± std over seeds per env and model size, their average, the
# relative gain over GRPO) from the logs of recipes/eval/run_eval.sh runs named METHOD/SIZE/SEED, e.g.
#   MODEL_SIZE=2B bash recipes/eval/run_eval.sh alfworld GRPO/2B/seed0=checkpoints/.../global_step_150 ...
#   bash recipes/eval/run_compare.sh            # reads results/eval/<env>/logs/<METHOD>/<SIZE>/<SEED>/
# Variables: LOGS (results/eval), BASELINE (GRPO), OUT (results/compare). Writes $OUT/compare.{md,csv}.
set -euo pipefail
exec python3 -m prover_verl.eval.compare --logs "${LOGS:-results/eval}" --baseline "${BASELINE:-GRPO}" \
  --out "${OUT:-results/compare}" "$@"
