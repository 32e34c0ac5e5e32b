"""What the tests that run real vLLM share: the skip (or, with ``PROVER_REQUIRE_VLLM=1``, the failure) where vLLM is
not installed, and the tiny model vLLM's CPU backend accepts."""

import os
from pathlib import Path

import pytest

from prover_verl import tiny_model

# the suite's own venv has no vLLM; the vLLM CPU venv (bash tools/install.sh --vllm) runs these, and tools/test.sh
# sets PROVER_REQUIRE_VLLM=1 there, so that a missing vLLM fails instead of skipping every test
REASON = "needs vLLM: bash tools/install.sh --vllm, then bash tools/test.sh runs these in .venv-vllm"


def require_vllm() -> None:
    if os.environ.get("PROVER_REQUIRE_VLLM") == "1":
        import vllm  # noqa: F401  (an ImportError fails the module)
    else:
        pytest.importorskip("vllm", reason=REASON)


def vllm_tiny_model(out: Path) -> Path:
    """The tiny dense Qwen3 with head size 32: vLLM's CPU attention refuses the default 16 ("Unsupported CPU
    attention configuration: head_dim=16")."""
    return tiny_model.build(out, arch="qwen3", sizes={"head_dim": 32})
