"""``prover_verl.cpu.smoke.run_smoke`` with a stand-in recipe (a bash script that writes its settings) instead of
verl: the asset cache shares a build between runs of the same settings only, and a run's processes end with it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from prover_verl.cpu import smoke

# A recipe's layout (recipes/<env>/run.sh sourcing recipes/common.sh, which sources cpu_smoke.sh) whose smoke
# builds only what is missing, as recipes/cpu_smoke.sh does, writes the settings into what it builds, and counts
# its builds; SMOKE_FAIL=1 fails the run after the build.
COMMON = """set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cpu_smoke.sh"
"""
CPU_SMOKE = """SMOKE_IMITATE=${SMOKE_IMITATE:-0.5}
if [ ! -f "$SMOKE_DIR/model/config.json" ]; then
  mkdir -p "$SMOKE_DIR/model" "$SMOKE_DIR/data"
  echo "$ENV_NAME ${SMOKE_ARCH:-qwen3} $SMOKE_IMITATE ${SEED:-1} $RANDOM" > "$SMOKE_DIR/model/config.json"
  echo "$ENV_NAME ${ENV_KWARGS:-}" > "$SMOKE_DIR/data/train.parquet"
  echo build >> "$BUILDS"
fi
echo "trained with judge ${SMOKE_JUDGE:-heuristic}" > "$SMOKE_DIR/trained.txt"
[ "${SMOKE_FAIL:-0}" = 0 ]
"""


@pytest.fixture
def recipe(tmp_path) -> Path:
    recipes = tmp_path / "recipes"
    (recipes / "toy").mkdir(parents=True)
    (recipes / "common.sh").write_text(COMMON)
    (recipes / "cpu_smoke.sh").write_text(CPU_SMOKE)
    script = recipes / "toy" / "run.sh"
    script.write_text('ENV_NAME=toy ESTIMATOR=grpo source "$(dirname "$0")/../common.sh" "$@"\n')
    return script


def builds(tmp_path: Path) -> int:
    log = tmp_path / "builds.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def assets(smoke_dir: Path) -> dict[str, str]:
    return {
        part: (smoke_dir / part / name).read_text()
        for part, name in (("model", "config.json"), ("data", "train.parquet"))
    }


def test_a_run_reuses_the_build_of_the_same_settings_and_builds_for_new_ones(tmp_path, recipe):
    cache = tmp_path / "cache"
    run = lambda name, **variables: smoke.run_smoke(  # noqa: E731
        recipe, tmp_path / name, 2, asset_cache=cache, BUILDS=str(tmp_path / "builds.log"), **variables
    )
    run("first")
    assert builds(tmp_path) == 1 and len(list(cache.iterdir())) == 1
    run("second", SMOKE_JUDGE="policy", SMOKE_K="4")  # settings of the run only: the first run's build, copied
    assert builds(tmp_path) == 1
    assert assets(tmp_path / "second") == assets(tmp_path / "first")  # $RANDOM in each build: the very same files
    assert (tmp_path / "second" / "trained.txt").read_text() == "trained with judge policy\n"
    run("imitated_less", SMOKE_IMITATE="0.3")
    assert builds(tmp_path) == 2 and assets(tmp_path / "imitated_less")["model"].startswith("toy qwen3 0.3 1 ")
    run("imitated_less_again", SMOKE_IMITATE="0.3")
    assert builds(tmp_path) == 2 and len(list(cache.iterdir())) == 2


def test_a_failed_run_or_a_smoke_dir_with_its_own_model_stores_nothing(tmp_path, recipe):
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError, match="--cpu-smoke failed"):
        smoke.run_smoke(recipe, tmp_path / "failed", 2, asset_cache=cache, BUILDS=str(tmp_path / "b"), SMOKE_FAIL="1")
    assert not cache.exists() or not list(cache.iterdir())
    # a model left in the smoke dir by a run of other settings is not this run's build: not stored under its key
    other = tmp_path / "reused"
    smoke.run_smoke(recipe, other, 2, BUILDS=str(tmp_path / "b"), SMOKE_IMITATE="0.9")
    smoke.run_smoke(recipe, other, 2, asset_cache=cache, BUILDS=str(tmp_path / "b"))
    assert not cache.exists() or not list(cache.iterdir())
    with pytest.raises(ValueError, match="assets or asset_cache"):
        smoke.run_smoke(recipe, tmp_path / "x", 2, assets=other, asset_cache=cache)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its new parent to reap it has ended)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


# a child that leaves the recipe's process group, as Ray's driver does (os.setpgrp), and outlives the recipe
LINGER = """python3 - "$SMOKE_DIR/child.pid" <<'PY' &
import os, sys, time
os.setpgrp()
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(120)
PY
while [ ! -s "$SMOKE_DIR/child.pid" ]; do sleep 0.05; done
"""


@pytest.mark.parametrize("outcome", ["timeout", "exit"])
def test_the_runs_processes_end_with_it(tmp_path, recipe, outcome):
    """A run that times out, or exits, leaves none of its processes behind, even one outside its process group."""
    (recipe.parent.parent / "cpu_smoke.sh").write_text(LINGER + ("sleep 120\n" if outcome == "timeout" else ""))
    start = time.monotonic()
    if outcome == "timeout":
        with pytest.raises(subprocess.TimeoutExpired):
            smoke.run_smoke(recipe, tmp_path / "run", 2, timeout_s=3)
    else:
        smoke.run_smoke(recipe, tmp_path / "run", 2)
    child = int((tmp_path / "run" / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(child), "the run's child outlived it"
    assert time.monotonic() - start < 30
