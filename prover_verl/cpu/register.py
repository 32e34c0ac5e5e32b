"""Registers the ``cpu`` platform and the ``hf`` rollout with verl (imported first by :mod:`prover_verl.plugin`).

The platform and the replica go through verl's registries (``PlatformRegistry``, ``RolloutReplicaRegistry``).
The rollout object that verl's FSDP worker builds in the hybrid engine has no registry: verl looks it up in a
module dict, so that dict gets one entry here -- the only verl module this project patches (see
:data:`ROLLOUT_CLASS_KEY`; ``tests/cpu/test_register_on_cpu.py`` fails if verl moves it).
"""

from __future__ import annotations

# the platform before anything else of verl: it must be registered before a module asks for the platform
from prover_verl.cpu import platform  # noqa: F401  (registers the platform on import)

# isort: split

from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.replica import RolloutReplicaRegistry

from prover_verl.cpu.hf_replica import NAME as ROLLOUT_NAME

# verl/workers/rollout/base.py, line 89 (verl 0.9.1): `_ROLLOUT_REGISTRY = {("vllm", "async"): "..."}`, read by
# get_rollout_class (line 96), which verl/workers/engine_workers.py (line 667) calls to build the worker's
# rollout adapter for actor_rollout_ref.rollout.name / mode. verl offers no function to add to it.
ROLLOUT_CLASS_KEY = (ROLLOUT_NAME, "async")
ROLLOUT_CLASS_PATH = "prover_verl.cpu.hf_replica.HFServerAdapter"


def _load_replica():
    from prover_verl.cpu.hf_replica import HFReplica

    return HFReplica


RolloutReplicaRegistry.register(ROLLOUT_NAME, _load_replica)
rollout_base._ROLLOUT_REGISTRY[ROLLOUT_CLASS_KEY] = ROLLOUT_CLASS_PATH
