"""Start-up checks against the installed packages and the data: attention implementation, train-set size."""

import importlib.util
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from prover_verl.preflight import (
    ATTN_PACKAGES,
    attn_implementation,
    check_attention,
    check_train_set,
    fit_epochs_to_steps,
    ignored_settings,
)

ROOT = Path(__file__).resolve().parents[1]


def model_config(**override):
    return OmegaConf.create({"actor_rollout_ref": {"model": {"path": "/m", "override_config": override}}})


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_verl_default_attention_without_flash_attn_fails_with_the_pip_command():
    config = model_config()
    assert attn_implementation(config) == "flash_attention_2"  # verl's HFModelConfig default
    with pytest.raises(ImportError) as err:
        check_attention(config)
    message = str(err.value)
    assert "actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2" in message
    assert "pip install flash-attn==" in message and "attn_implementation=sdpa" in message


def test_attention_that_needs_no_package_passes():
    for impl in ("sdpa", "eager"):
        check_attention(model_config(attn_implementation=impl))


def test_gpu_locks_pin_flash_attn_and_fla_and_the_message_names_the_locked_version():
    for lock in ("gpu-py3.11.txt", "gpu-py3.12.txt"):
        pins = dict(re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)$", (ROOT / "requirements" / lock).read_text(), re.M))
        assert "flash-attn" in pins and "flash-linear-attention" in pins, lock
        assert pins["verl"] == "0.9.1"
        assert f"flash-attn=={pins['flash-attn']} " in ATTN_PACKAGES["flash_attention_2"][1]


def test_gpu_extra_is_verls_fsdp_and_vllm_install():
    setup = (ROOT / "setup.py").read_text()
    assert '"gpu": ["verl[vllm,fsdp]==0.9.1"]' in setup


def train_config(path, batch, **data):
    return OmegaConf.create(
        {"data": {"train_files": str(path), "train_batch_size": batch, **data}, "trainer": {"val_only": False}}
    )


@pytest.fixture
def twelve_rows(tmp_path):
    import pandas as pd

    path = tmp_path / "train.parquet"
    pd.DataFrame({"extra_info": [{"task_id": str(i)} for i in range(12)]}).to_parquet(path)
    return path


def test_a_train_set_smaller_than_one_batch_fails_naming_the_sizes_and_the_override(twelve_rows):
    with pytest.raises(ValueError) as err:
        check_train_set(train_config(twelve_rows, 16))
    message = str(err.value)
    assert "hold 12 rows, fewer than one batch (data.train_batch_size=16)" in message
    assert "data.train_batch_size=12 actor_rollout_ref.actor.ppo_mini_batch_size=12" in message
    assert "TRAIN_BATCH=12" in message
    with pytest.raises(ValueError, match="hold 24 rows"):  # two files are counted together
        check_train_set(train_config(twelve_rows, 25, train_files=[str(twelve_rows), str(twelve_rows)]))


def test_a_train_set_of_one_batch_or_more_passes(twelve_rows):
    check_train_set(train_config(twelve_rows, 12))
    check_train_set(train_config(twelve_rows, 8))
    with pytest.raises(ValueError, match="hold 4 rows"):  # verl's own cap on the rows
        check_train_set(train_config(twelve_rows, 8, train_max_samples=4))


def test_validation_only_runs_skip_the_size_check_and_a_missing_file_fails(twelve_rows, tmp_path):
    config = train_config(twelve_rows, 16)
    config.trainer.val_only = True
    check_train_set(config)
    with pytest.raises(FileNotFoundError, match="data.train_files: no such file"):
        check_train_set(train_config(tmp_path / "none.parquet", 16))


def test_epochs_are_raised_to_what_the_steps_need(twelve_rows):
    # the README's ALFWorld setting: 12 tasks, batch 8 -> 1 step an epoch; verl's 30 epochs would end at step 30
    config = train_config(twelve_rows, 8)
    config.trainer.update({"total_training_steps": 150, "total_epochs": 30})
    notice = fit_epochs_to_steps(config)
    assert config.trainer.total_epochs == 150
    assert "raised from 30 to 150" in notice and "stop at step 30" in notice
    config = train_config(twelve_rows, 4)  # 3 steps an epoch: 10 steps need 4 epochs
    config.trainer.update({"total_training_steps": 10, "total_epochs": 30})
    assert fit_epochs_to_steps(config) is None
    assert config.trainer.total_epochs == 30  # already enough: left as set
    config.trainer.update({"total_training_steps": 100, "total_epochs": 2})
    fit_epochs_to_steps(config)
    assert config.trainer.total_epochs == 34  # ceil(100 / 3)
    config.trainer.total_training_steps = None  # no steps given: the epochs decide, as in verl
    config.trainer.total_epochs = 2
    fit_epochs_to_steps(config)
    assert config.trainer.total_epochs == 2


def test_settings_verl_ignores_here_are_named():
    config = OmegaConf.create(
        {
            "trainer": {"use_v1": True, "balance_batch": False, "v1": {"trainer_mode": "prover_sync", "sampler": {}}},
            "data": {"gen_batch_size": 16},
            "actor_rollout_ref": {"actor": {"use_dynamic_bsz": True, "ppo_micro_batch_size_per_gpu": 4}},
        }
    )
    config.trainer.v1.sampler.update({"max_off_policy_threshold": 2, "sync_refill_failed_groups": True})
    found = ignored_settings(config)
    assert [f.split(":")[0] for f in found] == [
        "trainer.balance_batch=False",
        "trainer.v1.sampler.max_off_policy_threshold=2",
        "data.gen_batch_size=16",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
    ]
    config.trainer.balance_batch = True  # verl's default
    config.trainer.v1.sampler.sync_refill_failed_groups = False  # then gen_batch_size takes effect
    config.actor_rollout_ref.actor.use_dynamic_bsz = False  # then micro batches do
    assert [f.split(":")[0] for f in ignored_settings(config)] == ["trainer.v1.sampler.max_off_policy_threshold=2"]
