#!/usr/bin/env bash
# ProVer on alfworld with Qwen3.5-2B. Usage: bash recipes/alfworld/run_prover_qwen3.5_2b.sh [--dry-run] [hydra overrides...]
# Protocol: default (docs/environments.md says why); PROTOCOL=verl_agent plays verl-agent's.
# Variables (MODEL_PATH, DATA_DIR, ENV_KWARGS, N_GPUS, ...) are documented in recipes/common.sh.
set -euo pipefail
ENV_NAME=alfworld PROTOCOL=${PROTOCOL:-default} ESTIMATOR=prover MODEL_SIZE=2B source "$(dirname "$0")/../common.sh" "$@"
