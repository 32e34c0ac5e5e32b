"""Shared helpers of the env tests."""

import multiprocessing
import time

import pytest
import ray


def _run_in_spawned_child(code: str, scope: dict, timeout_s: float = 120.0):
    """Exec ``code`` in a fresh (spawned) Python process with ``scope`` plus a ``queue``; return what it put there.

    A spawned child shares nothing with the test process: no loaded data, no JVM, no env instance, so a state it
    restores must carry everything the fork needs.
    """
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=exec, args=(code, {**scope, "queue": queue}))
    proc.start()
    deadline = time.monotonic() + timeout_s
    while queue.empty() and proc.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not queue.empty(), f"child exited with {proc.exitcode} and no result"
    result = queue.get(timeout=10)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    return result


@pytest.fixture
def run_in_spawned_child():
    """The function :func:`_run_in_spawned_child`."""
    return _run_in_spawned_child


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster of 4 CPUs for the module's pool tests (or the one already running), shut down after."""
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False)
    yield
    if started:
        ray.shutdown()
