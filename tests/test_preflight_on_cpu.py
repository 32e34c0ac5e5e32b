"""Start-up checks against the installed packages: the attention implementation verl will ask for."""

import importlib.util
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from prover_verl.preflight import ATTN_PACKAGES, attn_implementation, check_attention

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
