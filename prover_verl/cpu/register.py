"""Registers the ``cpu`` platform and the ``hf`` rollout with verl (imported first by :mod:`prover_verl.plugin`).

The platform and the replica go through verl's registries (``PlatformRegistry``, ``RolloutReplicaRegistry``).
Two things verl offers no hook for are patched here, and only here (``tests/cpu/test_register_on_cpu.py``
fails if verl changes either):

* the rollout object that verl's FSDP worker builds in the hybrid engine is looked up in a module dict, which
  gets one entry (:data:`ROLLOUT_CLASS_KEY`);
* the workers' process group is created with the backend ``cpu:gloo,<device>:<backend>``, which torch rejects
  when the device is ``cpu`` ("Duplicate device type cpu"); on the CPU platform it becomes ``cpu:gloo``.
"""

from __future__ import annotations

# the platform before anything else of verl: it must be registered before a module asks for the platform
from prover_verl.cpu import platform  # noqa: F401  (registers the platform on import)

# isort: split

import functools

from verl.checkpoint_engine import base as checkpoint_engine_base
from verl.utils import distributed
from verl.utils.device import get_device_name
from verl.workers import engine_workers
from verl.workers.engine.base import EngineRegistry
from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from prover_verl.cpu import ROLLOUT_NAME

# verl/workers/rollout/base.py, line 89 (verl 0.9.1): `_ROLLOUT_REGISTRY = {("vllm", "async"): "..."}`, read by
# get_rollout_class (line 96), which verl/workers/engine_workers.py (line 667) calls to build the worker's
# rollout adapter for actor_rollout_ref.rollout.name / mode. verl offers no function to add to it.
ROLLOUT_CLASS_KEY = (ROLLOUT_NAME, "async")
ROLLOUT_CLASS_PATH = "prover_verl.cpu.hf_replica.HFServerAdapter"


def _load_replica():
    from prover_verl.cpu.hf_replica import HFReplica

    return HFReplica


RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
# verl registers its FSDP engines for cuda and npu only; they are plain torch FSDP2, which runs over gloo on CPU
for _model_type, _engine in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
    EngineRegistry.register(model_type=_model_type, backend=["fsdp", "fsdp2"], device="cpu")(_engine)
rollout_base._ROLLOUT_REGISTRY[ROLLOUT_CLASS_KEY] = ROLLOUT_CLASS_PATH


# verl/utils/distributed.py, line 89 (verl 0.9.1), in initialize_global_process_group_ray:
# `backend = backend or f"cpu:gloo,{get_device_name()}:{get_nccl_backend()}"`; its callers pass no backend
# (verl/workers/engine_workers.py line 89, verl/checkpoint_engine/base.py), and import it by name.
PROCESS_GROUP_MODULES = (distributed, engine_workers, checkpoint_engine_base)
_verl_initialize_global_process_group_ray = distributed.initialize_global_process_group_ray


@functools.wraps(_verl_initialize_global_process_group_ray)
def initialize_global_process_group_ray(timeout_second=None, backend=None):
    if backend is None and get_device_name() == "cpu":
        backend = "cpu:gloo"
    return _verl_initialize_global_process_group_ray(timeout_second=timeout_second, backend=backend)


for _module in PROCESS_GROUP_MODULES:
    _module.initialize_global_process_group_ray = initialize_global_process_group_ray
