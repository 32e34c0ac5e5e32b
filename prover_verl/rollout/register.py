"""Registers ``rollout.name=vllm`` in verl's ``RolloutReplicaRegistry`` as :class:`ProverVLLMReplica` (imported by
:mod:`prover_verl.plugin`, so in every Ray process). The replica module is loaded only when a replica is built, so a
process without vLLM never imports it."""

from __future__ import annotations

from verl.utils.device import get_device_name
from verl.workers.rollout.replica import RolloutReplicaRegistry

NAME = "vllm"


def _load_vllm():
    if get_device_name() == "cpu":
        from prover_verl.cpu.vllm_replica import CPUVLLMReplica

        return CPUVLLMReplica
    from prover_verl.rollout.vllm_server import ProverVLLMReplica

    return ProverVLLMReplica


RolloutReplicaRegistry.register(NAME, _load_vllm)
