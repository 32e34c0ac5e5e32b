"""The cache of the tiny models and data that a recipe's ``--cpu-smoke`` builds (recipes/cpu_smoke.sh: tiny model,
parquet data, imitation of the env's expert: minutes on 2 cores), keyed by a hash of everything that shapes them, so
that runs of the same settings share one build (:func:`prover_verl.cpu.smoke.run_smoke`'s ``asset_cache``)."""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

ASSET_PARTS = ("model", "data")
# The environment variables that shape what recipes/cpu_smoke.sh builds (tiny model, data, imitation), besides the
# recipe's ENV_NAME; the rest (judge, K, lr, batch, dumps, ...) only shape the run. envs/alfworld reads ALFWORLD_DATA.
ASSET_VARIABLES = (
    "SMOKE_ARCH",
    "SMOKE_ROLLOUT",
    "SMOKE_HEAD_DIM",
    "SMOKE_TRAIN_TASKS",
    "SMOKE_VAL_TASKS",
    "SMOKE_IMITATE",
    "ENV_KWARGS",
    "SEED",
    "ALFWORLD_DATA",
)
# the scripts beside a recipe whose text builds the assets (their defaults of the variables above included)
ASSET_SCRIPTS = ("common.sh", "cpu_smoke.sh")


def recipe_env(recipe: str | os.PathLike) -> str:
    """The ``ENV_NAME`` a recipe script sets (``ENV_NAME=webshop ... source common.sh``).

    Raises:
        ValueError: The recipe sets no ``ENV_NAME``.
    """
    found = re.search(r"\bENV_NAME=(\w+)", Path(recipe).read_text())
    if found is None:
        raise ValueError(f"{recipe} sets no ENV_NAME: cannot tell which env's smoke assets it builds")
    return found.group(1)


def source_roots(recipe: str | os.PathLike) -> list[Path]:
    """The files and folders whose content shapes a recipe's smoke assets: the smoke's scripts, and the packages
    that build the tiny model, the data and the imitation (``prover_verl``, ``envs``: the experts, the tasks)."""
    recipes = Path(recipe).resolve().parent.parent
    packages = [Path(importlib.util.find_spec(name).origin).parent for name in ("prover_verl", "envs")]
    return [*(recipes / script for script in ASSET_SCRIPTS), *packages]


def _files(roots: Iterable[Path]) -> list[tuple[str, Path]]:
    """Every file under ``roots``, named relative to its root (bytecode caches left out)."""
    files = []
    for root in roots:
        if not root.exists():
            raise FileNotFoundError(f"smoke asset source {root} does not exist")
        found = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        files += [(f"{root.name}/{p.relative_to(root)}", p) for p in found if "__pycache__" not in p.parts]
    return files


@functools.cache
def _installed() -> tuple[str, ...]:
    """The installed distributions and their versions (read once: a second per call on a loaded machine)."""
    return tuple(sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()))


def asset_key(env_name: str, variables: Mapping[str, str], sources: Iterable[Path]) -> str:
    """A hash of every setting that shapes the tiny model and data of an env's ``--cpu-smoke``: the env, the
    :data:`ASSET_VARIABLES` as the script sees them (unset is not empty), the content of ``sources`` (which hold the
    scripts' defaults and the code that builds), the interpreter and the installed distributions' versions.

    Args:
        env_name: The recipe's ``ENV_NAME``.
        variables: The environment the recipe runs in.
        sources: Files and folders (read recursively) whose content shapes the build.

    Returns:
        A hex digest: equal keys mean the same build.
    """
    settings = {"env": env_name, **{name: variables.get(name) for name in ASSET_VARIABLES}}
    # float sums may differ with the number of threads torch splits them over
    threads = (os.cpu_count(), variables.get("OMP_NUM_THREADS"))
    digest = hashlib.sha256(json.dumps([settings, threads, sys.version, _installed()], sort_keys=True).encode())
    for name, path in _files(sources):
        content = path.read_bytes()
        digest.update(f"\0{name}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()[:32]


def complete(entry: Path) -> bool:
    """Whether the cache ``entry`` holds a whole build (model and data)."""
    return all((entry / part).is_dir() for part in ASSET_PARTS)


def store_assets(smoke_dir: Path, entry: Path) -> None:
    """Copy ``smoke_dir``'s model and data to the cache ``entry``, whole or not at all (a copy under a temporary
    name, then renamed; a run that stored the same entry first wins)."""
    if complete(entry):
        return
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    for part in ASSET_PARTS:
        shutil.copytree(smoke_dir / part, staging / part)
    try:
        staging.rename(entry)
    except OSError:  # stored meanwhile
        shutil.rmtree(staging)
