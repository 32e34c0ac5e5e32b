"""``prover_verl.cpu.assets``: the key of a ``--cpu-smoke``'s tiny model and data changes with every setting and
source file that shapes them, and with nothing else."""

import re
from pathlib import Path

import pytest

from prover_verl.cpu import assets

ROOT = Path(__file__).resolve().parents[2]


def test_the_key_changes_with_every_setting_and_source_that_shapes_the_build(tmp_path):
    sources = tmp_path / "src"
    (sources / "__pycache__").mkdir(parents=True)
    (sources / "imitate.py").write_text("STEPS = 600\n")
    base = {name: "1" for name in assets.ASSET_VARIABLES}
    key = assets.asset_key("webshop", base, [sources])
    assert key == assets.asset_key("webshop", dict(base), [sources])
    assert assets.asset_key("alfworld", base, [sources]) != key
    for name in assets.ASSET_VARIABLES:
        assert assets.asset_key("webshop", {**base, name: "2"}, [sources]) != key, name
        unset = {k: v for k, v in base.items() if k != name}
        assert assets.asset_key("webshop", unset, [sources]) != key, f"{name} unset reads as set"
    # the run's own settings and where it runs do not shape the build
    run_only = {"SMOKE_JUDGE": "policy", "SMOKE_K": "4", "SMOKE_LR": "1", "SMOKE_DIR": "/x", "SMOKE_STEPS": "3"}
    assert assets.asset_key("webshop", {**base, **run_only}, [sources]) == key
    (sources / "__pycache__" / "imitate.cpython-311.pyc").write_bytes(b"\0")
    assert assets.asset_key("webshop", base, [sources]) == key
    (sources / "imitate.py").write_text("STEPS = 601\n")
    assert assets.asset_key("webshop", base, [sources]) != key
    with pytest.raises(FileNotFoundError, match="missing"):
        assets.asset_key("webshop", base, [tmp_path / "missing"])


def test_the_key_covers_every_variable_that_cpu_smoke_sh_builds_with():
    """The variables that the build section of recipes/cpu_smoke.sh (tiny model, data, imitation) reads are all in
    the key, but for the ones it derives from the smoke dir and the recipe's env."""
    script = (ROOT / "recipes" / "cpu_smoke.sh").read_text()
    build = script[script.index("MODEL_PATH=$SMOKE_DIR/model") : script.index("export VERL_PLATFORM")]
    read = set(re.findall(r"\$\{?([A-Z_]+)", build))
    derived = {"SMOKE_DIR", "MODEL_PATH", "DATA_DIR", "CORPUS_ARGS", "ENV_NAME"}
    assert read - derived <= set(assets.ASSET_VARIABLES), read - derived - set(assets.ASSET_VARIABLES)
    assert {"SMOKE_ARCH", "SMOKE_IMITATE", "ENV_KWARGS", "SEED"} <= read  # the section was found
    roots = assets.source_roots(ROOT / "recipes" / "webshop" / "run_prover_qwen3.5_2b.sh")
    assert {ROOT / "recipes" / "cpu_smoke.sh", ROOT / "recipes" / "common.sh", ROOT / "envs"} <= set(roots)
