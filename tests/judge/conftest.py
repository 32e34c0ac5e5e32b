"""The judge tests' scripted OpenAI-compatible server (tests/judge/scripted_openai_server.py), run as a process."""

import importlib.util
import json
import urllib.request
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "scripted_openai_server", Path(__file__).with_name("scripted_openai_server.py")
)
scripted_openai_server = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(scripted_openai_server)


class Served:
    """A running scripted server: its process, base URL and request log."""

    def __init__(self, process, url, log: Path):
        self.process, self.url, self.log = process, url, log

    def script(self, steps: list[dict]) -> "Served":
        """Replace the server's script and forget the requests logged so far."""
        request = urllib.request.Request(
            self.url.removesuffix("/v1") + "/script", json.dumps(steps).encode(), {"Content-Type": "application/json"}
        )
        urllib.request.urlopen(request, timeout=10).read()
        self.log.write_text("")
        return self

    def requests(self) -> list[dict]:
        """The request bodies received since the last :meth:`script`."""
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.process.stdout.close()


def start_server(log: Path, script=None, policy=None) -> Served:
    """Start a scripted server logging its requests to ``log``."""
    log.write_text("")
    return Served(*scripted_openai_server.serve(script if policy is None else None, policy, log), log)


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """One scripted server for a module's tests (starting one takes seconds); each test sets its script."""
    served = start_server(tmp_path_factory.mktemp("judge_server") / "requests.jsonl", script=[{"content": ""}])
    yield served
    served.stop()


@pytest.fixture
def openai_server(shared_server):
    """``openai_server(steps)``: the module's scripted server, answering with ``steps`` from now on."""
    return shared_server.script


@pytest.fixture
def own_server(tmp_path):
    """``own_server(steps)`` or ``own_server(policy="FILE.py:FUNCTION")``: a scripted server of the test's own (for
    a server that dies, or one a policy answers); killed at its end."""
    started = []

    def start(steps=None, policy=None):
        started.append(start_server(tmp_path / f"requests-{len(started)}.jsonl", script=steps, policy=policy))
        return started[-1]

    yield start
    for served in started:
        served.stop()


@pytest.fixture
def down_url():
    """The base URL of an endpoint that is down: a port nothing listens on."""
    return f"http://127.0.0.1:{scripted_openai_server.free_port()}/v1"
