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


def fit_epochs_to_steps(config: Any) -> str | None:
    """Raise ``trainer.total_epochs`` so that ``trainer.total_training_steps`` can all run; return what changed.

    verl 0.9.1's v1 loop stops at whichever comes first, ``total_epochs`` epochs or ``total_training_steps`` steps
    (``verl/trainer/ppo/v1/trainer_base.py``, ``fit``), although its config says the steps override the epochs
    (line 768). On a small train set verl's default 30 epochs end the run early without a word (12 ALFWorld tasks
    at batch 8: step 30 of 150). With steps given, the epochs become at least what the steps need, and the change
    is returned for the caller to print. Does nothing without ``total_training_steps``, for remote train files, or
    for ``val_only``.
    """
    steps = config.trainer.get("total_training_steps")
    if steps is None or config.trainer.get("val_only", False):
        return None
    rows, batch = train_rows(config), config.data.train_batch_size
    if rows < batch:  # remote files (-1) cannot be counted; too few rows fail in check_train_set
        return None
    per_epoch = rows // batch  # verl's train loader drops the incomplete last batch
    needed = -(-int(steps) // per_epoch)
    epochs = config.trainer.total_epochs
    if epochs >= needed:
        return None
    config.trainer.total_epochs = needed
    return (
        f"trainer.total_epochs raised from {epochs} to {needed}: trainer.total_training_steps={steps} needs "
        f"{needed} epochs of {per_epoch} steps ({rows} train rows // data.train_batch_size={batch}); verl would "
        f"otherwise stop at step {epochs * per_epoch}"
    )


# verl 0.9.1 keys that take no effect in this project's setting (v1 trainer, sync mode, dynamic batch size): a
# value set for them would mislead whoever reads the config. key -> (when it is ignored, why)
_IGNORED = {
    "trainer.balance_batch": (lambda c: c.trainer.get("use_v1", False), "the v1 trainer balances every batch"),
    "trainer.v1.sampler.max_off_policy_threshold": (
        lambda c: c.trainer.v1.get("trainer_mode") in ("sync", "prover_sync"),
        "sync mode is on-policy (verl/trainer/ppo/v1/replay_buffer.py: a no-op there)",
    ),
    "data.gen_batch_size": (
        lambda c: bool(c.trainer.v1.sampler.get("sync_refill_failed_groups", False)),
        "trainer.v1.sampler.sync_refill_failed_groups=true forces prompts one at a time (gen_batch_size=1)",
    ),
}
_DYNAMIC_BSZ_IGNORED = (
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu",
    "critic.ppo_micro_batch_size_per_gpu",
)


def ignored_settings(config: Any) -> list[str]:
    """Keys given a value that verl 0.9.1 ignores in this run's mode, each with the reason."""
    from omegaconf import OmegaConf

    found = []
    defaults = {"trainer.balance_batch": True, "trainer.v1.sampler.max_off_policy_threshold": None}
    for key, (applies, why) in _IGNORED.items():
        value = OmegaConf.select(config, key, default=None)
        if value is not None and value != defaults.get(key) and applies(config):
            found.append(f"{key}={value}: {why}")
    if OmegaConf.select(config, "actor_rollout_ref.actor.use_dynamic_bsz", default=False):
        for key in _DYNAMIC_BSZ_IGNORED:
            value = OmegaConf.select(config, key, default=None)
            if value is not None:
                found.append(f"{key}={value}: use_dynamic_bsz=true sizes micro batches by tokens instead")
    return found
