"""The CPU platform and the ``hf`` rollout are registered with verl by the plugin, in verl's own registries."""

import inspect
import os
import subprocess
import sys

import pytest
import torch
from verl.plugin.platform import PlatformRegistry
from verl.workers import engine_workers
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import get_rollout_class
from verl.workers.rollout.replica import RolloutReplicaRegistry

from prover_verl.cpu.hf_replica import HFReplica, HFServerAdapter
from prover_verl.cpu.platform import PlatformCPU
from prover_verl.cpu.register import ROLLOUT_CLASS_KEY


def test_platform_is_registered_and_describes_cpu():
    assert PlatformRegistry.get("cpu") is PlatformCPU
    platform = PlatformCPU()
    assert (platform.device_name, platform.ray_resource_name(), platform.communication_backend_name()) == (
        "cpu",
        "CPU",
        "gloo",
    )
    # Ray refuses "CPU" as a custom resource: a worker's share must be asked for as num_cpus
    assert platform.ray_resource_options(0.5) == {"num_cpus": 0.5}
    assert platform.ray_noset_envvars() == []
    assert torch.zeros(1).to(platform.current_device()).device.type == "cpu"
    device = platform.device_module
    assert (device.memory_reserved(), device.max_memory_allocated(), device.mem_get_info()) == (0, 0, (0, 0))
    assert device.empty_cache() is None and device.synchronize is torch.cpu.synchronize
    platform.empty_cache()
    platform.set_allocator_settings("expandable_segments:False")


def _device_utils_in_fresh_process(env: dict[str, str]) -> str:
    code = (
        "import verl\n"
        "from verl.utils.device import get_device_name, get_nccl_backend, get_resource_name\n"
        "print(get_device_name(), get_nccl_backend(), get_resource_name())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.slow
def test_verl_device_utils_resolve_to_cpu_by_variable_and_by_detection():
    # a fresh process: verl resolves its platform once per process, on first use after the plugin loaded
    assert _device_utils_in_fresh_process({"VERL_PLATFORM": "cpu"}) == "cpu gloo CPU"
    if sys.modules["torch"].cuda.is_available():
        pytest.skip("auto-detection picks the GPU on this machine")
    env = {k: v for k, v in os.environ.items() if k != "VERL_PLATFORM"}
    env["VERL_PLATFORM"] = ""
    assert _device_utils_in_fresh_process(env) == "cpu gloo CPU"


def test_hf_rollout_is_registered():
    assert RolloutReplicaRegistry.get("hf") is HFReplica
    assert get_rollout_class("hf", "async") is HFServerAdapter


def test_the_one_patched_verl_module_is_where_register_says():
    # prover_verl/cpu/register.py adds an entry to this dict because verl offers no function for it; if verl
    # renames it, moves the lookup, or builds the worker's rollout differently, this fails
    assert ROLLOUT_CLASS_KEY in rollout_base._ROLLOUT_REGISTRY
    assert "_ROLLOUT_REGISTRY[(rollout_name, mode)]" in inspect.getsource(rollout_base.get_rollout_class)
    assert "get_rollout_class(rollout_config.name, rollout_config.mode)" in inspect.getsource(engine_workers)
    assert not hasattr(rollout_base, "register_rollout_class"), "verl now has a hook: use it instead of the dict"


def test_process_group_backend_patch_is_installed_where_verl_imports_it():
    from verl.checkpoint_engine import base as checkpoint_engine_base
    from verl.utils import distributed

    from prover_verl.cpu import register

    source = inspect.getsource(register._verl_initialize_global_process_group_ray)
    assert 'backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"' in source
    for module in (distributed, engine_workers, checkpoint_engine_base):
        assert module.initialize_global_process_group_ray is register.initialize_global_process_group_ray
    assert "initialize_global_process_group_ray(timeout_second=None)" in inspect.getsource(engine_workers)


def test_workers_process_group_initialises_with_gloo_on_cpu(monkeypatch):
    import torch.distributed as dist
    from verl.plugin.platform import get_platform

    from prover_verl.cpu.register import initialize_global_process_group_ray

    if get_platform().device_name != "cpu":
        pytest.skip("this process resolved a GPU platform")
    for key, value in {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29533", "RANK": "0", "WORLD_SIZE": "1"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("DIST_INIT_METHOD", raising=False)
    initialize_global_process_group_ray()
    try:
        assert dist.get_backend() == "cpu:gloo"
    finally:
        dist.destroy_process_group()


def test_checkpoint_rng_state_round_trips_on_the_cpu_platform():
    # verl stores the device RNG under the device name and restores it on resume (checkpoint_manager.py,
    # load_rng_state): on the CPU platform that is torch's CPU generator, which torch.cpu cannot set
    from verl.utils.checkpoint.checkpoint_manager import BaseCheckpointManager
    from verl.utils.device import get_device_name

    if get_device_name() != "cpu":
        pytest.skip("this process resolved an accelerator platform")
    state = BaseCheckpointManager.get_rng_state()
    expected = torch.rand(4)
    torch.rand(7)
    BaseCheckpointManager.load_rng_state(state)
    torch.testing.assert_close(torch.rand(4), expected)


def test_cpu_platform_is_detected_only_on_a_node_without_any_accelerator(tmp_path, monkeypatch):
    from prover_verl.cpu import platform as cpu_platform

    dev, proc = tmp_path / "dev", tmp_path / "proc"
    dev.mkdir()
    proc.mkdir()
    nowhere = lambda tool: None  # noqa: E731
    assert cpu_platform.node_accelerators(str(dev), str(proc), nowhere) == []
    # a GPU node seen from a Ray actor that asked for no GPU: CUDA_VISIBLE_DEVICES="" hides the device from torch,
    # and nvidia-smi may be missing, but the device nodes are there
    (dev / "nvidia0").touch()
    (dev / "nvidiactl").touch()
    assert cpu_platform.node_accelerators(str(dev), str(proc), nowhere) == [
        str(dev / "nvidia0"),
        str(dev / "nvidiactl"),
    ]
    (dev / "nvidia0").unlink()
    (dev / "nvidiactl").unlink()
    (proc / "driver" / "nvidia").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").touch()
    assert cpu_platform.node_accelerators(str(dev), str(proc), nowhere) == [str(proc / "driver/nvidia/version")]
    assert cpu_platform.node_accelerators(str(dev), str(tmp_path), lambda t: t == "npu-smi") == ["npu-smi"]
    monkeypatch.setattr(cpu_platform, "node_accelerators", lambda: ["/dev/nvidia0"])
    assert not PlatformCPU().is_platform_available(use_smi_check=True)  # verl then falls back to `nvidia`
    monkeypatch.setattr(cpu_platform, "node_accelerators", lambda: [])
    assert PlatformCPU().is_platform_available(use_smi_check=True)
    # the Ray cluster's declared resources decide too (a GPU-less head node of a GPU cluster)
    assert cpu_platform.cluster_accelerators({"CPU": 8.0, "GPU": 0.0, "memory": 1e9}) == {}
    assert cpu_platform.cluster_accelerators({"CPU": 8.0, "GPU": 16.0, "NPU": 0.0}) == {"GPU": 16.0}
    monkeypatch.setattr(cpu_platform, "cluster_accelerators", lambda: {"GPU": 16.0})
    assert not PlatformCPU().is_platform_available(use_smi_check=True)


def test_cpu_engines_are_registered_and_build_unpinned_and_without_flash_attn(tmp_path):
    from verl.utils import model as verl_model
    from verl.workers.engine.base import EngineRegistry
    from verl.workers.engine.fsdp import transformer_impl
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    from prover_verl import tiny_model
    from prover_verl.cpu import register

    for model_type, engine in (
        ("language_model", register.CPUFSDPEngineWithLMHead),
        ("value_model", register.CPUFSDPEngineWithValueHead),
    ):
        assert EngineRegistry._engines[model_type]["fsdp2"]["cpu"] is engine
    # what the two scoped swaps stand in for; if verl changes either line, revisit prover_verl/cpu/register.py
    assert "offload_policy = CPUOffloadPolicy(pin_memory=True)" in inspect.getsource(FSDPEngine._build_fsdp_module)
    assert "from verl.utils.model import load_valuehead_model" in inspect.getsource(FSDPEngine._build_module)
    assert 'attn_implementation="flash_attention_2"' in inspect.getsource(verl_model.load_valuehead_model)
    policy = register._unpinned(transformer_impl.CPUOffloadPolicy)(pin_memory=True)
    assert isinstance(policy, transformer_impl.CPUOffloadPolicy) and policy.pin_memory is False
    with register._swapped(transformer_impl, "CPUOffloadPolicy", "swapped") as original:
        assert transformer_impl.CPUOffloadPolicy == "swapped"
    assert transformer_impl.CPUOffloadPolicy is original
    # the critic's value model loads on CPU with the attention its config names
    from transformers import AutoConfig

    path = tiny_model.build(tmp_path / "model")
    config = AutoConfig.from_pretrained(path, attn_implementation="sdpa")
    config.num_labels = 1
    model = register._load_value_model(str(path), torch.float32, config, trust_remote_code=False)
    assert type(model).__name__ == "Qwen3ForTokenClassification" and model.config._attn_implementation == "sdpa"
    assert model(input_ids=torch.tensor([[1, 2, 3]])).logits.shape == (1, 3, 1)


_PROCESSOR_IN_FRESH_PROCESS = """
import sys
from transformers import AutoProcessor
if sys.argv[2] == "register":
    import prover_verl.cpu.register  # binds the classes on import, as in every process that imports verl
try:
    processor = AutoProcessor.from_pretrained(sys.argv[1])
    print(type(processor).__name__, type(processor.video_processor).__name__)
except ImportError as err:
    print("ImportError", "torchvision" in str(err).lower())
"""


def test_qwen3_5_processor_needs_the_torchvision_fallback(tmp_path):
    """Without torchvision, transformers refuses Qwen3.5's processor (its video processor) and verl would silently
    take its text path (verl/utils/tokenizer/tokenizer.py, lines 247-252); the plugin binds the real classes.
    Fails when transformers learns to load it without torchvision, or changes how it looks the classes up."""
    from transformers.utils import is_torchvision_available

    from prover_verl import tiny_model
    from prover_verl.cpu import register

    if is_torchvision_available():
        assert register.expose_video_processor_without_torchvision() is False
        pytest.skip("torchvision is installed: transformers loads Qwen3.5's processor by itself")
    model_dir = tiny_model.build(tmp_path / "vl", arch=tiny_model.VL_ARCH)

    def load(mode: str) -> str:
        code = [sys.executable, "-c", _PROCESSOR_IN_FRESH_PROCESS, str(model_dir), mode]
        out = subprocess.run(code, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().splitlines()[-1]

    assert load("plain") == "ImportError True", "transformers now loads it without torchvision: drop the fallback"
    assert load("register") == "Qwen3VLProcessor Qwen3VLVideoProcessor"
    # where transformers looks the class up without torchvision (video_processing_auto.py) and what it checks it
    # against (processing_utils.py): the names register.py binds
    from transformers import processing_utils
    from transformers.models.auto import video_processing_auto

    lookup = inspect.getsource(video_processing_auto.video_processor_class_from_name)
    assert 'main_module = importlib.import_module("transformers")' in lookup
    assert "fast_video_processor_class = None" in inspect.getsource(video_processing_auto)
    assert processing_utils.MODALITY_TO_BASE_CLASS_MAPPING["video_processor"] == "BaseVideoProcessor"
    assert set(register.VIDEO_PROCESSOR_CLASSES) == {"BaseVideoProcessor", "Qwen3VLVideoProcessor"}
