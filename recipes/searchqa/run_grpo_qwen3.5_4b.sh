#!/usr/bin/env bash
# GRPO baseline on searchqa with Qwen3.5-4B. Usage: bash recipes/searchqa/run_grpo_qwen3.5_4b.sh [--dry-run] [hydra overrides...]
# Protocol: search_r1 (Search-R1's published setting; PROTOCOL=verl_agent or PROTOCOL= for the env's default).
# Variables (MODEL_PATH, DATA_DIR, ENV_KWARGS, N_GPUS, ...) are documented in recipes/common.sh.
set -euo pipefail
ENV_NAME=searchqa ESTIMATOR=grpo MODEL_SIZE=4B source "$(dirname "$0")/../common.sh" "$@"
