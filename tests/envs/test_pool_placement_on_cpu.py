"""Env pools pinned to a node of a multi-node Ray cluster: a node that can never host the workers fails the pool at
once, and a node's shared pool whose host died says why at every call."""

import asyncio
import os
import time

import pytest
import ray
from ray.cluster_utils import Cluster

import envs
from envs.pools.ray_pool import EnvPool, EnvPoolError
from envs.pools.shared import SharedEnvPool
from envs.toy import ToyEnv

envs.register_env("toy", "envs.toy:ToyEnv")


@pytest.fixture(scope="module")
def two_nodes():
    """A head of 2 CPUs and a node of 0 CPUs (a KubeRay head started with ``--num-cpus=0`` is one)."""
    if ray.is_initialized():
        pytest.skip("needs a Ray cluster of its own")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    cluster.add_node(num_cpus=0)
    ray.init(address=cluster.address, log_to_driver=False)
    nodes = {node["Resources"].get("CPU", 0): node["NodeID"] for node in ray.nodes() if node["Alive"]}
    yield nodes
    ray.shutdown()
    cluster.shutdown()


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_pool_pinned_to_a_node_that_cannot_host_its_workers_fails_at_once(two_nodes):
    start = time.monotonic()
    # before, Ray kept the worker pending and the pool failed only after start_timeout_s ("failed to start")
    with pytest.raises(EnvPoolError, match=r"can never start: its 2 workers reserve 2 CPUs and the node has 0 in all"):
        EnvPool("toy", num_workers=2, node_id=two_nodes[0], start_timeout_s=60.0)
    assert time.monotonic() - start < 30
    with pytest.raises(EnvPoolError, match="not alive"):
        EnvPool("toy", num_workers=1, node_id="f" * 56)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_shared_pool_whose_data_cannot_be_opened_fails_clearly_and_is_not_cached_dead(two_nodes, tmp_path):
    class NeedsData(ToyEnv):  # local, so that Ray ships the class itself to the workers
        """A toy env that cannot start without its data file, as an env whose store is missing on a node."""

        def __init__(self, data_file: str, **kwargs):
            if not os.path.exists(data_file):
                raise FileNotFoundError(f"no data at {data_file}")
            super().__init__(**kwargs)

    envs.register_env("toy_needs_data", NeedsData)
    data = tmp_path / "data"
    pool = SharedEnvPool("toy_needs_data", {"data_file": str(data)}, num_workers=1, node_id=two_nodes[2])
    try:
        for _ in range(2):  # each call says why, instead of a raw actor error on a dead handle
            with pytest.raises(EnvPoolError, match=r"(?s)is down: .*no data at"):
                asyncio.run(pool.reset(task_id="code-0"))
    finally:
        pool.shutdown()
