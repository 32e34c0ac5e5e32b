"""The platform verl's TaskRunner resolves on a head node without any GPU, in a Ray cluster whose workers have GPUs."""

import pytest
import ray
from ray.cluster_utils import Cluster


@pytest.mark.slow
@pytest.mark.timeout(300)  # two Ray nodes and verl's imports in a worker: ~25 s on a loaded 2-core machine
def test_a_gpu_job_whose_head_node_has_no_gpu_does_not_start_as_a_cpu_job(monkeypatch):
    if ray.is_initialized():
        pytest.skip("needs a Ray cluster of its own")
    monkeypatch.delenv("VERL_PLATFORM", raising=False)  # auto-detection, as on a real cluster
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0, "resources": {"head": 1}})
    cluster.add_node(num_cpus=1, num_gpus=1)  # a GPU node (declared: this machine has none)
    ray.init(address=cluster.address, log_to_driver=False)
    try:

        @ray.remote(num_cpus=0, resources={"head": 0.01})
        def detect_on_the_head() -> tuple[list[str], str]:
            from verl.plugin.platform import platform_manager

            from prover_verl.cpu import platform as cpu_platform

            return cpu_platform.node_accelerators(), platform_manager._detect_platform_name()

        evidence, chosen = ray.get(detect_on_the_head.remote(), timeout=240)
        if evidence:
            pytest.skip(f"this machine shows an accelerator ({evidence}): its head node is no CPU-only node")
        # before, the head's lack of any GPU trace chose `cpu`: CPU bundles and gloo for a GPU job
        assert chosen == "nvidia"
    finally:
        ray.shutdown()
        cluster.shutdown()
