#!/usr/bin/env bash
# Shared launcher of the recipes: GRPO or ProVer on one environment with Qwen3.5-2B/4B on verl 0.9.1.
#
# Sourced by recipes/<env>/run_<method>_qwen3.5_<size>.sh, which set ENV_NAME, ESTIMATOR and MODEL_SIZE.
# Everything else can be set from the environment:
#   MODEL_PATH   model directory or hub id        (default: Qwen/Qwen3.5-${MODEL_SIZE})
#   DATA_DIR     train/val parquet from prover_verl.data (default: ~/data/prover/${ENV_NAME})
#   ENV_KWARGS   JSON constructor args of the env, e.g. '{"data_dir": "/data/alfworld"}' (default: {})
#   PROTOCOL     the env's named protocol (docs/environments.md), put into ENV_KWARGS as "protocol" (the WebShop
#                and ALFWorld recipes set default; Search-QA's below is search_r1, Search-R1's published setting;
#                empty: the env's default); the data (prover_verl.data) and imitation read it from ENV_KWARGS too
#   N_GPUS       GPUs per node = FSDP ranks and rollout replicas per node (default 8)
#   AGENT_WORKERS  verl agent-loop worker processes (rollout.agent.num_workers; default 8)
#   ENV_WORKERS  env worker processes per node, shared by the node's agent-loop workers (env.pool_workers; default 4)
#   NNODES, TOTAL_STEPS, PROJECT, EXPERIMENT, CKPT_DIR, LOGGER
#   TRAIN_BATCH  tasks per step (default per env below); the shipped small data sets need a smaller one
#   SEED         data.seed (the sampler's task order) and rollout.seed (default 1); with
#                actor_rollout_ref.rollout.full_determinism=true each generation is seeded by its step, task, session
#                and turn, so a rerun samples the same on the CPU replica
# Flags: --dry-run prints the resolved verl config and exits (no GPU needed); --cpu-smoke runs the same recipe on
# CPU with a tiny model (docs/cpu_loop.md; SMOKE_DIR, SMOKE_STEPS, SMOKE_JUDGE, ...); anything else goes to hydra.
set -euo pipefail

: "${ENV_NAME:?set by the recipe}" "${ESTIMATOR:?set by the recipe}" "${MODEL_SIZE:?set by the recipe}"
MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3.5-${MODEL_SIZE}}
DATA_DIR=${DATA_DIR:-$HOME/data/prover/${ENV_NAME}}
ENV_KWARGS=${ENV_KWARGS:-"{}"}
TOTAL_STEPS=${TOTAL_STEPS:-150}
PROJECT=${PROJECT:-prover}
EXPERIMENT=${EXPERIMENT:-${ENV_NAME}_${ESTIMATOR}_qwen3.5_${MODEL_SIZE,,}}
CKPT_DIR=${CKPT_DIR:-checkpoints/${PROJECT}/${EXPERIMENT}}
LOGGER=${LOGGER:-"[console,tensorboard]"}
SEED=${SEED:-1}

DRY_RUN=false
CPU_SMOKE=false
EXTRA=()
for arg in "$@"; do
  case "$arg" in
    --dry-run) DRY_RUN=true ;;
    --cpu-smoke) CPU_SMOKE=true ;;
    *) EXTRA+=("$arg") ;;
  esac
done
if [ "$CPU_SMOKE" = true ]; then
  # the job's shape scaled to a laptop: the same variables, smaller defaults (recipes/cpu_smoke.sh does the rest)
  : "${N_GPUS:=2}" "${AGENT_WORKERS:=2}" "${ENV_WORKERS:=2}"
fi
N_GPUS=${N_GPUS:-8}
AGENT_WORKERS=${AGENT_WORKERS:-8}
ENV_WORKERS=${ENV_WORKERS:-4}
NNODES=${NNODES:-1}

# Per-environment episode budget (turns, tokens) and batch shape. With the policy as judge, the judge prompt must
# fit the same context: its budget below is about 3 characters a token of that context, less the judge's answer.
case "$ENV_NAME" in
  alfworld) MAX_TURNS=50; PROMPT_LEN=2048; RESPONSE_LEN=8192; BATCH=16; GROUP=8 ;;
  webshop)  MAX_TURNS=15; PROMPT_LEN=2048; RESPONSE_LEN=6144; BATCH=16; GROUP=8 ;;
  # Search-QA: search_r1's 4 searching turns and a last one to answer (the default protocol stops at 4)
  searchqa) MAX_TURNS=5;  PROMPT_LEN=1024; RESPONSE_LEN=4096; BATCH=64; GROUP=5; PROTOCOL=${PROTOCOL-search_r1} ;;
  # the toy with a known pivot (envs/keydoor): at most 10 rooms, a line of text each
  keydoor)  MAX_TURNS=10; PROMPT_LEN=512;  RESPONSE_LEN=1536; BATCH=16; GROUP=8 ;;
  *) echo "unknown ENV_NAME=$ENV_NAME" >&2; exit 2 ;;
esac
BATCH=${TRAIN_BATCH:-$BATCH}
# the one place PROTOCOL enters ENV_KWARGS (after the per-env default above): data, imitation and the run read it there
if [ -n "${PROTOCOL:-}" ]; then
  ENV_KWARGS=$(python3 -c '
import json, sys
kwargs, name = json.loads(sys.argv[1]), sys.argv[2]
given = kwargs.get("protocol", name)
if given != name:
    sys.exit(f"ENV_KWARGS protocol={given!r} and PROTOCOL={name!r} disagree; give one")
print(json.dumps({**kwargs, "protocol": name}))' "$ENV_KWARGS" "$PROTOCOL") || exit 2
fi
# Per model size: the token budget of one micro batch per GPU with verl's dynamic batch size (actor, and by default
# ref and rollout log-probs, and the critic); docs/reproduce.md has the arithmetic. It must hold the longest
# sequence, prompt + response (ALFWorld: 10240). Micro batch sizes in sequences are not set: with dynamic batch
# size verl ignores them.
case "$MODEL_SIZE" in
  2B) TP=1; TOKENS_PER_GPU=16384 ;;
  4B) TP=1; TOKENS_PER_GPU=12288 ;;
  *) echo "unknown MODEL_SIZE=$MODEL_SIZE" >&2; exit 2 ;;
esac
SAVE_FREQ=25
TEST_FREQ=25
SMOKE=()
if [ "$CPU_SMOKE" = true ]; then
  source "$(dirname "${BASH_SOURCE[0]}")/cpu_smoke.sh"
fi
# Baselines (GiGPO, RLOO, PPO) and ProVer ablation flags: per-method settings in recipes/methods.sh (after the
# smoke's settings, which change the model path the critic takes).
source "$(dirname "${BASH_SOURCE[0]}")/methods.sh"

exec python3 -m prover_verl.main \
  dry_run="$DRY_RUN" \
  algorithm.adv_estimator="$ESTIMATOR" \
  data.train_files="$DATA_DIR/train.parquet" \
  data.val_files="$DATA_DIR/val.parquet" \
  data.train_batch_size="$BATCH" \
  data.seed="$SEED" \
  actor_rollout_ref.rollout.seed="$SEED" \
  data.max_prompt_length="$PROMPT_LEN" \
  data.max_response_length="$RESPONSE_LEN" \
  +data.apply_chat_template_kwargs.enable_thinking=false \
  actor_rollout_ref.model.path="$MODEL_PATH" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size="$BATCH" \
  actor_rollout_ref.actor.use_dynamic_bsz=true \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu="$TOKENS_PER_GPU" \
  actor_rollout_ref.actor.use_kl_loss=true \
  actor_rollout_ref.actor.kl_loss_coef=0.01 \
  actor_rollout_ref.rollout.n="$GROUP" \
  actor_rollout_ref.rollout.agent.num_workers="$AGENT_WORKERS" \
  actor_rollout_ref.rollout.tensor_model_parallel_size="$TP" \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.6 \
  actor_rollout_ref.rollout.max_model_len=$((PROMPT_LEN + RESPONSE_LEN)) \
  algorithm.prover.judge.max_prompt_chars=$((3 * (PROMPT_LEN + RESPONSE_LEN - 512))) \
  env.name="$ENV_NAME" \
  "env.kwargs='$ENV_KWARGS'" \
  env.max_turns="$MAX_TURNS" \
  env.pool_workers="$ENV_WORKERS" \
  trainer.n_gpus_per_node="$N_GPUS" \
  trainer.nnodes="$NNODES" \
  trainer.total_training_steps="$TOTAL_STEPS" \
  trainer.project_name="$PROJECT" \
  trainer.experiment_name="$EXPERIMENT" \
  trainer.default_local_dir="$CKPT_DIR" \
  trainer.logger="$LOGGER" \
  trainer.save_freq="$SAVE_FREQ" \
  trainer.test_freq="$TEST_FREQ" \
  trainer.v1.sampler.sync_refill_failed_groups=true \
  "${SMOKE[@]+"${SMOKE[@]}"}" \
  "${EXTRA[@]+"${EXTRA[@]}"}"
