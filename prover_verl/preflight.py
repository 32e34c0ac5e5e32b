"""Checks of a training config against this machine's packages, run at start and by ``--dry-run`` (no GPU, no Ray).

Each catches, before any Ray worker starts, a failure that verl would otherwise hit minutes later inside a worker.
"""

from __future__ import annotations

import importlib.util
from typing import Any

ATTN_KEY = "actor_rollout_ref.model.override_config.attn_implementation"
# verl's HFModelConfig falls back to this when override_config has no attn_implementation
# (verl/workers/config/model.py); transformers then needs the package below at model init.
VERL_DEFAULT_ATTN = "flash_attention_2"
# attn_implementation -> (module transformers imports, pip command that installs it; the pin is the GPU lock's)
ATTN_PACKAGES = {
    "flash_attention_2": ("flash_attn", "pip install flash-attn==2.8.3 --no-build-isolation"),
    "flash_attention_3": ("flash_attn_interface", "pip install flash-attn-3 (built from flash-attention's hopper/)"),
}


def attn_implementation(config: Any) -> str:
    """The attention implementation verl's FSDP workers will ask transformers for."""
    override = config.actor_rollout_ref.model.get("override_config") or {}
    return override.get("attn_implementation", VERL_DEFAULT_ATTN)


def check_attention(config: Any) -> None:
    """Fail, naming the key and the pip command, if the configured attention implementation cannot be imported.

    Raises:
        ImportError: the implementation's package is not installed in this environment.
    """
    impl = attn_implementation(config)
    if impl not in ATTN_PACKAGES:
        return  # sdpa, eager, flex_attention: part of torch / transformers
    module, command = ATTN_PACKAGES[impl]
    if importlib.util.find_spec(module) is None:
        where = f"{ATTN_KEY}={impl}" + ("" if impl != VERL_DEFAULT_ATTN else " (verl's default)")
        raise ImportError(
            f"{where} needs the '{module}' package, which is not installed: {command} "
            f'(or install the GPU lock: pip install -r requirements/gpu-py3.XX.txt -e ".[gpu]"). '
            f"Without it, choose another implementation: +{ATTN_KEY}=sdpa"
        )
