#!/usr/bin/env bash
# The paper-table path on the checkpoints of benchmarks/learning.py: each run's final checkpoint evaluated the way
# docs/reproduce.md tells a user to (recipes/eval/run_eval.sh --cpu-smoke, then recipes/eval/run_compare.sh).
#
# Usage: bash benchmarks/learning_eval.sh OUT WORK   # learning.py's --out (results.json) and --work (base0/, runs/)
# Each run <method>_seed<s> is evaluated as METHOD/tiny/seed<s> (grpo -> GRPO, the baseline; prover_oracle1.0 ->
# ProVer (oracle 1.0); prover_heuristic -> ProVer (heuristic); gigpo -> GiGPO) on every task of the validation set
# (WORK/base0/data/val.parquet: every base lists the same tasks), as the benchmark validated (OUT/results.json's
# val_samples: 1 greedy episode a task, n > 1 sampled at temperature 1, n a task, seeded with the run's seed), on the
# run's own tiny model (SMOKE_DIR), with as many FSDP ranks as its checkpoint was saved with. Writes
# WORK/eval/<env>/tables.md (one row per run) and WORK/eval/compare/compare.md (mean ± std over seeds, average, gain
# over GRPO). A run whose logs are newer than its checkpoint is not evaluated again. Run it with the project's venv
# active (the recipes call python3).
set -euo pipefail
[ $# -eq 2 ] || { sed -n 2,13p "$0"; exit 2; }
RESULTS=$(realpath "$1")/results.json
LEARN=$(realpath "$2")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$RESULTS" ] || { echo "no $RESULTS: let benchmarks/learning.py finish first" >&2; exit 2; }
[ -d "$LEARN/runs" ] || { echo "no $LEARN/runs: not a benchmarks/learning.py --work" >&2; exit 2; }
read -r ENV_NAME ENV_KWARGS < <(python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["settings"]
print(s["env"], s["env_kwargs"])' "$RESULTS") || true
[ -n "${ENV_NAME:-}" ] || { echo "$RESULTS: no settings.env" >&2; exit 2; }
EVAL=$LEARN/eval/$ENV_NAME
VAL=$LEARN/base0/data/val.parquet
[ -f "$VAL" ] || { echo "no validation set $VAL" >&2; exit 2; }
SAMPLES=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["settings"].get("val_samples", 1))' \
  "$RESULTS")
SAMPLING=()  # run_eval.sh's own default is greedy, one episode a task; later overrides win
if [ "$SAMPLES" -gt 1 ]; then
  # seeded as the run's own validation was (SEED, full_determinism), so the draws can be compared one for one
  SAMPLING=(actor_rollout_ref.rollout.val_kwargs.do_sample=true actor_rollout_ref.rollout.val_kwargs.temperature=1.0
    "actor_rollout_ref.rollout.val_kwargs.n=$SAMPLES" actor_rollout_ref.rollout.full_determinism=true)
fi

method_name() {  # learning.py's METHODS key -> the table's method name
  case "$1" in
    grpo) echo GRPO ;;
    gigpo) echo GiGPO ;;
    prover_oracle*) echo "ProVer (oracle ${1#prover_oracle})" ;;
    prover_*) echo "ProVer (${1#prover_})" ;;
    *) echo "$1" ;;
  esac
}

start=$SECONDS
evaluated=0
for run in "$LEARN"/runs/*_seed*/; do
  run=${run%/}
  base=$(basename "$run"); method=${base%_seed*}; seed=${base##*_seed}
  ckpts=$run/checkpoints
  [ -f "$ckpts/latest_checkpointed_iteration.txt" ] || { echo "[learning_eval] $base: no checkpoint, skipped" >&2; continue; }
  ckpt=$ckpts/global_step_$(cat "$ckpts/latest_checkpointed_iteration.txt")
  # verl's FSDP checkpoint is one shard per rank: evaluate with the ranks it was saved with
  ranks=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["world_size"])' "$ckpt/actor/fsdp_config.json")
  name="$(method_name "$method")/tiny/seed$seed"
  if compgen -G "$EVAL/logs/$name/episodes-*.jsonl" >/dev/null && [ "$EVAL/logs/$name" -nt "$ckpt" ]; then
    echo "[learning_eval] $name: evaluated already ($EVAL/logs/$name)"
    continue
  fi
  echo "[learning_eval] $name <- $ckpt ($ranks ranks; $((SECONDS - start)) s)"
  SMOKE_DIR=$run OUT=$EVAL ENV_KWARGS=$ENV_KWARGS SEED=$seed N_GPUS=$ranks AGENT_WORKERS=$ranks ENV_WORKERS=$ranks \
    SMOKE_GROUP_LOG="" bash "$ROOT/recipes/eval/run_eval.sh" "$ENV_NAME" --cpu-smoke "$name=$ckpt" \
    -- "data.val_files=$VAL" "${SAMPLING[@]+"${SAMPLING[@]}"}" >"$run/eval.log" 2>&1 || { tail -n 40 "$run/eval.log" >&2; exit 1; }
  evaluated=$((evaluated + 1))
done
[ -d "$EVAL/logs" ] || { echo "no checkpoint under $LEARN/runs/*_seed*/checkpoints" >&2; exit 1; }
LOGS=$LEARN/eval OUT=$LEARN/eval/compare BASELINE=GRPO bash "$ROOT/recipes/eval/run_compare.sh"
echo "[learning_eval] $evaluated checkpoints evaluated in $((SECONDS - start)) s; tables: $EVAL/tables.md"
