#!/usr/bin/env bash
# GRPO baseline on keydoor (the text task with a known pivotal turn, envs/keydoor) with Qwen3.5-2B; with --cpu-smoke
# it is what benchmarks/learning.py runs. Usage: bash recipes/keydoor/run_grpo_qwen3.5_2b.sh [--dry-run] [--cpu-smoke]
# [hydra overrides...]. Variables (MODEL_PATH, DATA_DIR, N_GPUS, SEED, ...) are documented in recipes/common.sh.
set -euo pipefail
ENV_NAME=keydoor ESTIMATOR=grpo MODEL_SIZE=2B source "$(dirname "$0")/../common.sh" "$@"
