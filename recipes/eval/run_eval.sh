#!/usr/bin/env bash
# Evaluate trained checkpoints on an environment's validation split and write the paper-style tables.
#
# Usage: bash recipes/eval/run_eval.sh ENV NAME=CHECKPOINT_DIR [NAME=CHECKPOINT_DIR ...]
#   e.g. bash recipes/eval/run_eval.sh alfworld GRPO=checkpoints/prover/alfworld_grpo_qwen3.5_2b/global_step_150 \
#                                              ProVer=checkpoints/prover/alfworld_prover_qwen3.5_2b/global_step_150
# Each checkpoint runs verl with trainer.val_only=true (one greedy episode per validation task) and the agent
# loop logs every episode to $OUT/logs/NAME; prover_verl.eval.tables then writes $OUT/tables.md and CSVs over every
# run logged under $OUT/logs, this call's and earlier calls' (re-evaluating a NAME replaces its logs).
# Variables: MODEL_SIZE (2B), BASELINE (GRPO: the run, if logged, that tables.md's gains are over), OUT
# (results/eval/ENV), plus those of recipes/common.sh. NAME may hold spaces and brackets, never '='.
# Every agent-loop worker appends to $OUT/logs/NAME: on several nodes OUT must be on a shared filesystem.
# Names METHOD/SIZE/SEED (e.g. GiGPO/2B/seed1) feed the multi-method table of recipes/eval/run_compare.sh.
# --dry-run (anywhere) prints each run's resolved verl config instead of running it, and writes no tables.
# --cpu-smoke (anywhere) evaluates on CPU with the hf replica, as recipes/cpu_smoke.sh trains: set SMOKE_DIR to the
# training run's (its tiny model is the architecture the checkpoint loads into), and pass a larger validation set
# after -- (data.val_files=..., from python -m prover_verl.data) than the smoke's 2 tasks. Each run's metrics go
# to $OUT/metrics/NAME.jsonl, never over the training run's.
# Arguments after -- are hydra overrides passed to every run.
set -euo pipefail
DRY=(); SMOKE=(); SPECS=(); HYDRA=(); after_dashes=false
for arg in "$@"; do
  if $after_dashes; then HYDRA+=("$arg")
  elif [ "$arg" = -- ]; then after_dashes=true
  elif [ "$arg" = --dry-run ]; then DRY=(--dry-run)
  elif [ "$arg" = --cpu-smoke ]; then SMOKE=(--cpu-smoke)
  else SPECS+=("$arg"); fi
done
set -- "${SPECS[@]+"${SPECS[@]}"}"
[ $# -ge 2 ] || { sed -n 2,19p "$0"; exit 2; }
EVAL_ENV=$1; shift
OUT=${OUT:-results/eval/$EVAL_ENV}
# the validation data the tables must find an episode of each task for: the last data.val_files after --, else
# the recipe's (recipes/common.sh, or the smoke's)
VAL_DATA=""
for arg in "${HYDRA[@]+"${HYDRA[@]}"}"; do
  case "$arg" in data.val_files=*) VAL_DATA=${arg#data.val_files=} ;; esac
done
if [ -z "$VAL_DATA" ]; then
  if [ ${#SMOKE[@]} -gt 0 ]; then VAL_DATA=${SMOKE_DIR:-${TMPDIR:-/tmp}/prover_smoke/${EVAL_ENV}_grpo}/data/val.parquet
  else VAL_DATA=${DATA_DIR:-$HOME/data/prover/$EVAL_ENV}/val.parquet; fi
fi
VAL_ARGS=()
IFS=, read -r -a VAL_LIST <<<"${VAL_DATA//[\[\]\'\"]/}"  # a hydra list [a,b] too
for path in "${VAL_LIST[@]}"; do VAL_ARGS+=(--val-data "$path"); done
for spec in "$@"; do
  name=${spec%%=*}; ckpt=${spec#*=}; ckpt=${ckpt%/}  # verl parses the step from the directory name
  [ -d "$ckpt" ] || { echo "no checkpoint directory: $ckpt" >&2; exit 2; }
  log_dir=$(realpath -m "$OUT/logs/$name")  # absolute: the workers do not run in this directory
  rm -rf "$log_dir"
  metrics=$(realpath -m "$OUT/metrics/${name//\//_}.jsonl")
  mkdir -p "$(dirname "$metrics")"
  (
    export VERL_FILE_LOGGER_PATH=$metrics
    ENV_NAME=$EVAL_ENV ESTIMATOR=grpo MODEL_SIZE=${MODEL_SIZE:-2B}
    EXPERIMENT=eval_${EVAL_ENV}_${name//[^A-Za-z0-9._-]/_}
    # paths quoted for hydra: a name like "ProVer (oracle 1.0)/tiny/seed1" is not hydra grammar unquoted
    source "$(dirname "$0")/../common.sh" "${DRY[@]+"${DRY[@]}"}" "${SMOKE[@]+"${SMOKE[@]}"}" \
      trainer.val_only=true trainer.val_before_train=true \
      trainer.resume_mode=resume_path "trainer.resume_from_path='$ckpt'" \
      actor_rollout_ref.rollout.val_kwargs.n=1 actor_rollout_ref.rollout.val_kwargs.do_sample=false \
      actor_rollout_ref.rollout.val_kwargs.temperature=0 \
      "env.eval_log_dir='$log_dir'" "${HYDRA[@]+"${HYDRA[@]}"}"
  )
done
[ ${#DRY[@]} -eq 0 ] || exit 0
BASELINE=${BASELINE:-GRPO}
BASELINE_ARGS=()
if compgen -G "$OUT/logs/$BASELINE/episodes-*.jsonl" >/dev/null; then BASELINE_ARGS=(--baseline "$BASELINE"); fi
python3 -m prover_verl.eval.tables --logs "$OUT/logs" "${BASELINE_ARGS[@]+"${BASELINE_ARGS[@]}"}" "${VAL_ARGS[@]}" \
  --out "$OUT"
