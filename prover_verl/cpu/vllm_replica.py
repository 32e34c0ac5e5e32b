"""``rollout.name=vllm`` on the ``cpu`` platform: verl's vLLM replica (:class:`ProverVLLMReplica`), whose servers are
launched without Ray accelerator ids.

verl 0.9.1's ``vLLMReplica.launch_servers`` (``verl/workers/rollout/vllm_rollout/vllm_async_server.py``, lines
1344-1352) asks each of the replica's workers for ``ray.get_runtime_context().get_accelerator_ids()[
get_resource_name()][0]``, to put it in the server's ``CUDA_VISIBLE_DEVICES``; on CPU the resource is ``CPU``,
which Ray never lists as an accelerator (KeyError). This launch is verl's with the workers' node ids only: one server
per node of the replica, named and placed as verl places it, given every worker's rank as its visible device.

Its servers' vLLM workers load synced weights through vLLM's layerwise reload (:class:`CPUColocateWorkerExtension`):
vLLM's CPU linear layers pack their weights for oneDNN once loaded and drop the originals
(``vllm/model_executor/layers/linear.py``, line 215: ``dispatch_cpu_unquantized_gemm(layer, remove_weight=True)``),
so verl's in-place ``model.load_weights`` (``verl/workers/rollout/vllm_rollout/utils.py``, line 405) meets empty
parameters ("Attempted to load weight (torch.Size([128, 64])) into parameter (torch.Size([0]))").
"""

from __future__ import annotations

import asyncio
from typing import Any

import ray
from verl.plugin.platform import get_platform
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

from prover_verl.rollout.vllm_server import ProverVLLMHttpServer, ProverVLLMReplica


class CPUColocateWorkerExtension(vLLMColocateWorkerExtension):
    """verl's worker extension, loading each weight sync as vLLM reloads weights (see the module's docstring)."""

    def update_weights_from_ipc(self, *args: Any, **kwargs: Any) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload

        # vLLM's own reload (GPUModelRunner.reload_weights, which the CPU runner inherits): the layers get their
        # parameters back, take the sync's tensors, and are packed again once each is complete
        model = self.model_runner.model
        initialize_layerwise_reload(model)
        super().update_weights_from_ipc(*args, **kwargs)
        finalize_layerwise_reload(model, self.model_runner.model_config)


class CPUVLLMHttpServer(ProverVLLMHttpServer):
    """:class:`ProverVLLMHttpServer` whose vLLM workers take :class:`CPUColocateWorkerExtension`."""

    def _get_worker_extension_cls(self) -> str:
        return f"{CPUColocateWorkerExtension.__module__}.{CPUColocateWorkerExtension.__qualname__}"


class CPUVLLMReplica(ProverVLLMReplica):
    """:class:`ProverVLLMReplica` launched on CPU nodes, serving through :class:`CPUVLLMHttpServer` (see the module's
    docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.server_class = ray.remote(CPUVLLMHttpServer)

    async def launch_servers(self) -> None:
        assert len(self.workers) == self.world_size, f"{len(self.workers)} workers for world size {self.world_size}"
        node_ids = await asyncio.gather(
            *[w.__ray_call__.remote(lambda w: ray.get_runtime_context().get_node_id()) for w in self.workers]
        )
        per_node = self.gpus_per_replica_node
        role = "reward_" if self.is_reward_model else "teacher_" if self.is_teacher_model else ""
        env_vars = {**{var: "1" for var in get_platform().ray_noset_envvars()}, **get_platform().rollout_env_vars()}
        for node_rank in range(self.nnodes):
            server = self.server_class.options(
                scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                    node_id=node_ids[node_rank * per_node], soft=False
                ),
                runtime_env={"env_vars": env_vars},
                name=f"{self._get_server_name_prefix()}server_{role}{self.replica_rank}_{node_rank}{self.name_suffix}",
                max_concurrency=self.max_concurrency,
            ).remote(
                config=self.config,
                model_config=self.model_config,
                rollout_mode=self.rollout_mode,
                workers=self.workers[node_rank * per_node : (node_rank + 1) * per_node],
                replica_rank=self.replica_rank,
                node_rank=node_rank,
                gpus_per_node=per_node,
                nnodes=self.nnodes,
                cuda_visible_devices=",".join(str(rank) for rank in range(per_node)),
            )
            self.servers.append(server)
        master_address, master_port, dp_rpc_port = await self.servers[0].get_master_address.remote()
        await asyncio.gather(
            *[
                s.launch_server.remote(master_address=master_address, master_port=master_port, dp_rpc_port=dp_rpc_port)
                for s in self.servers
            ]
        )
        address, port = await self.servers[0].get_server_address.remote()
        self._server_handle = self.servers[0]
        self._server_address = f"{address}:{port}"

    def rollout_worker_use_gpu(self) -> bool:
        return False
