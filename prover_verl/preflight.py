"""Checks of a training config against this machine's packages and the data, at start and by ``--dry-run``.

Each catches, before any Ray worker starts, a failure that verl would otherwise hit minutes later inside a worker.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

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


def train_rows(config: Any) -> int:
    """Rows verl's train dataset will hold at most: the rows of ``data.train_files``, capped by
    ``data.train_max_samples`` (``data.filter_overlong_prompts`` may drop more once tokenized); -1 for remote files.

    Raises:
        FileNotFoundError: a train file does not exist.
    """
    import pyarrow.parquet as pq

    files = config.data.train_files
    files = [files] if isinstance(files, str) else list(files)
    rows = 0
    for path in files:
        if "://" in path:  # verl copies remote files at start; they cannot be counted here
            logger.warning("data.train_files: %s is not local, the train-set size is not checked", path)
            return -1
        if not os.path.isfile(os.path.expanduser(path)):
            raise FileNotFoundError(f"data.train_files: no such file {path!r} (python -m prover_verl.data writes it)")
        rows += pq.read_metadata(os.path.expanduser(path)).num_rows
    cap = config.data.get("train_max_samples", -1)
    return min(rows, cap) if cap is not None and cap > 0 else rows


def check_train_set(config: Any) -> None:
    """Fail, naming the sizes and the override, if the train set holds less than one batch.

    verl's train loader drops the incomplete last batch (``drop_last=True``) and counts
    ``steps_per_epoch = rows // data.train_batch_size``, so with fewer rows than one batch the loader is empty and
    ``fit()`` divides by zero right after the first validation. Not checked for ``trainer.val_only=true``, which
    never trains.

    Raises:
        ValueError: fewer rows than ``data.train_batch_size``.
    """
    if config.trainer.get("val_only", False):
        return
    rows, batch = train_rows(config), config.data.train_batch_size
    if 0 <= rows < batch:
        raise ValueError(
            f"data.train_files hold {rows} rows, fewer than one batch (data.train_batch_size={batch}): verl drops "
            f"the incomplete batch and would have no step to train. Lower the batch to at most {rows} (hydra: "
            f"data.train_batch_size={rows} actor_rollout_ref.actor.ppo_mini_batch_size={rows}; the recipes: "
            f"TRAIN_BATCH={rows}) or write more tasks"
        )
