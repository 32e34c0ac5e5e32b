"""``prover_verl.cpu.smoke``: the cache of the tiny models and data a ``--cpu-smoke`` builds, keyed by every setting
that shapes them, with a stand-in recipe (a bash script that writes its settings) instead of verl."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from prover_verl.cpu import smoke

ROOT = Path(__file__).resolve().parents[2]

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


def test_the_key_changes_with_every_setting_and_source_that_shapes_the_build(tmp_path):
    sources = tmp_path / "src"
    (sources / "__pycache__").mkdir(parents=True)
    (sources / "imitate.py").write_text("STEPS = 600\n")
    base = {name: "1" for name in smoke.ASSET_VARIABLES}
    key = smoke.asset_key("webshop", base, [sources])
    assert key == smoke.asset_key("webshop", dict(base), [sources])
    assert smoke.asset_key("alfworld", base, [sources]) != key
    for name in smoke.ASSET_VARIABLES:
        assert smoke.asset_key("webshop", {**base, name: "2"}, [sources]) != key, name
        unset = {k: v for k, v in base.items() if k != name}
        assert smoke.asset_key("webshop", unset, [sources]) != key, f"{name} unset reads as set"
    # the run's own settings and where it runs do not shape the build
    run_only = {"SMOKE_JUDGE": "policy", "SMOKE_K": "4", "SMOKE_LR": "1", "SMOKE_DIR": "/x", "SMOKE_STEPS": "3"}
    assert smoke.asset_key("webshop", {**base, **run_only}, [sources]) == key
    (sources / "__pycache__" / "imitate.cpython-311.pyc").write_bytes(b"\0")
    assert smoke.asset_key("webshop", base, [sources]) == key
    (sources / "imitate.py").write_text("STEPS = 601\n")
    assert smoke.asset_key("webshop", base, [sources]) != key
    with pytest.raises(FileNotFoundError, match="missing"):
        smoke.asset_key("webshop", base, [tmp_path / "missing"])


def test_the_key_covers_every_variable_that_cpu_smoke_sh_builds_with():
    """The variables that the build section of recipes/cpu_smoke.sh (tiny model, data, imitation) reads are all in
    the key, but for the ones it derives from the smoke dir and the recipe's env."""
    script = (ROOT / "recipes" / "cpu_smoke.sh").read_text()
    build = script[script.index("MODEL_PATH=$SMOKE_DIR/model") : script.index("export VERL_PLATFORM")]
    read = set(re.findall(r"\$\{?([A-Z_]+)", build))
    derived = {"SMOKE_DIR", "MODEL_PATH", "DATA_DIR", "CORPUS_ARGS", "ENV_NAME"}
    assert read - derived <= set(smoke.ASSET_VARIABLES), read - derived - set(smoke.ASSET_VARIABLES)
    assert {"SMOKE_ARCH", "SMOKE_IMITATE", "ENV_KWARGS", "SEED"} <= read  # the section was found
    roots = smoke.source_roots(ROOT / "recipes" / "webshop" / "run_prover_qwen3.5_2b.sh")
    assert {ROOT / "recipes" / "cpu_smoke.sh", ROOT / "recipes" / "common.sh", ROOT / "envs"} <= set(roots)
