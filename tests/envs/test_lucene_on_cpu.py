"""The JVM under pyserini keeps its signal handlers when a library installs its own after it (envs/_lucene.py)."""

import os
import subprocess
import sys
import textwrap

import pytest

from envs import _lucene

# The order that killed a pytest process with SIGSEGV: the JVM searched a while (its compiler is warm), a Ray driver
# starts and stops in the same process (ray.init installs Ray's crash handlers over the JVM's, ray.shutdown leaves
# SIGSEGV at its default action), then envs search from threads.
CRASHING_ORDER = textwrap.dedent(
    """
    import ctypes, signal, sys, tempfile
    from concurrent.futures import ThreadPoolExecutor
    import ray
    from envs import _lucene
    from envs.searchqa.env import SearchQAEnv

    env = SearchQAEnv(cache_dir=tempfile.mkdtemp())  # its JVM warms up in the searches below

    def episode(task, target):
        target.reset(options={"task_id": task})
        return [target.step(a) for a in target.expert_actions()]

    tasks = env.task_ids()[:40]
    for task in tasks:
        episode(task, env)
    try:
        ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    except Exception as err:  # Ray's start can time out on loaded cores: not what this checks
        print("RAY-START-FAILED", err)
        sys.exit(0)
    ray.shutdown()

    def segv_handler():
        action = ctypes.create_string_buffer(256)
        ctypes.CDLL(None).sigaction(int(signal.SIGSEGV), None, action)
        return action.raw[:8]

    jvm = _lucene._jvm_handlers[int(signal.SIGSEGV)].raw[:8]
    assert segv_handler() != jvm  # Ray took it over (if this fails, Ray changed: the guard may be moot)
    workers = [SearchQAEnv() for _ in range(4)]
    for _ in range(5):
        with ThreadPoolExecutor(4) as pool:
            chunks = list(pool.map(lambda w: [episode(t, workers[w]) for t in tasks[w::4]], range(4)))
    assert [chunks[i % 4][i // 4] for i in range(len(tasks))] == [episode(t, env) for t in tasks]
    assert segv_handler() == jvm  # the searches put the JVM's handler back
    signal.signal(signal.SIGBUS, lambda *_: None)  # any library's handler, installed after the JVM's
    assert _lucene.keep_jvm_signal_handlers() == 1
    assert _lucene.keep_jvm_signal_handlers() == 0
    print("OK")
    """
)


@pytest.mark.timeout(300)
def test_threaded_search_after_a_ray_driver_started_and_stopped_does_not_crash():
    # before the fix: exit -11 (SIGSEGV) in the threaded searches
    done = subprocess.run([sys.executable, "-c", CRASHING_ORDER], capture_output=True, text=True, timeout=280)
    if "RAY-START-FAILED" in done.stdout:
        pytest.skip(f"Ray did not start: {done.stdout[-300:]}")
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), (done.returncode, done.stderr[-2000:])


JVM_ARGUMENTS = (
    "from envs import _lucene; _lucene.start_jvm(); from jnius import autoclass; "
    "print(list(autoclass('java.lang.management.ManagementFactory').getRuntimeMXBean().getInputArguments()))"
)


@pytest.mark.parametrize(
    ("given", "expected"), [(None, list(_lucene.JVM_OPTIONS)), ("-Xmx300m -XX:+UseParallelGC", ["-Xmx300m"])]
)
def test_env_jvm_starts_with_a_small_young_generation_or_the_options_given(given, expected):
    # With the JVM's defaults the heap of a searching env process kept growing with garbage (+160 MB in 300 searches)
    env = {k: v for k, v in os.environ.items() if k not in ("PROVER_JVM_OPTIONS", "JAVA_TOOL_OPTIONS")}
    if given is not None:
        env["PROVER_JVM_OPTIONS"] = given
    done = subprocess.run([sys.executable, "-c", JVM_ARGUMENTS], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    arguments = done.stdout.strip().splitlines()[-1]
    assert all(option in arguments for option in expected)
    assert ("UseSerialGC" in arguments) == (given is None)
