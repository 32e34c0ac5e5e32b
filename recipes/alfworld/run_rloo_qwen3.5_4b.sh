#!/usr/bin/env bash
# RLOO baseline (verl's rloo estimator) on alfworld with Qwen3.5-4B. Usage: bash recipes/alfworld/run_rloo_qwen3.5_4b.sh [--dry-run] [hydra overrides...]
# Protocol: default (docs/environments.md says why); PROTOCOL=verl_agent plays verl-agent's.
# Variables (MODEL_PATH, DATA_DIR, ENV_KWARGS, N_GPUS, ...) are documented in recipes/common.sh.
set -euo pipefail
ENV_NAME=alfworld PROTOCOL=${PROTOCOL:-default} ESTIMATOR=rloo MODEL_SIZE=4B source "$(dirname "$0")/../common.sh" "$@"
