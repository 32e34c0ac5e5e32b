#!/usr/bin/env bash
# PPO baseline (verl's GAE with a critic) on webshop with Qwen3.5-2B. Usage: bash recipes/webshop/run_ppo_qwen3.5_2b.sh [--dry-run] [hydra overrides...]
# Protocol: default (docs/environments.md says why); PROTOCOL=verl_agent plays verl-agent's.
# Variables (MODEL_PATH, DATA_DIR, ENV_KWARGS, N_GPUS, ...) are documented in recipes/common.sh.
set -euo pipefail
ENV_NAME=webshop PROTOCOL=${PROTOCOL:-default} ESTIMATOR=gae MODEL_SIZE=2B source "$(dirname "$0")/../common.sh" "$@"
