#!/usr/bin/env bash
# Install prover-verl for CPU into ./.venv from the lock (requirements/cpu.txt), as the README says.
# One resolver run over fully pinned versions: about 2 minutes from an empty cache on 2 cores.
#   bash tools/install.sh
# For the GPU install use the GPU lock instead (see README, "Training with verl").
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_CPU=2.13.0  # keep equal to requirements/cpu-overrides.txt
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q uv
# torch first and on its own: on this project's machines pip takes the CPU wheel they keep on disk; elsewhere add
# --index-url https://download.pytorch.org/whl/cpu for the CPU build (PyPI's Linux torch is a CUDA build).
python -m pip install -q "torch==${TORCH_CPU}"
uv pip install -q -r requirements/cpu.txt -e .
python -c "import torch, verl, prover_verl; assert torch.__version__.startswith('${TORCH_CPU}'), torch.__version__"
echo "installed into .venv (torch $(python -c 'import torch; print(torch.__version__)'))"
