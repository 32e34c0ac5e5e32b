"""The data generators (tools/make_data) stay out of the installed package: not shipped, not imported by it."""

import ast
import re
from pathlib import Path

from setuptools import find_packages

REPO = Path(__file__).resolve().parents[2]


def test_setup_ships_no_tools_package():
    setup_py = (REPO / "setup.py").read_text()
    include = ast.literal_eval(re.search(r"find_packages\(include=(\[.*?\])\)", setup_py).group(1))
    shipped = find_packages(where=str(REPO), include=include)
    assert "envs" in shipped and "prover_verl" in shipped
    assert not [p for p in shipped if p.split(".")[0] in ("tools", "tests", "benchmarks")]


def test_no_installed_module_imports_the_generators():
    importers = []
    for path in [*(REPO / "prover_verl").rglob("*.py"), *(REPO / "envs").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(n == "tools" or n.startswith("tools.") for n in names):
                importers.append(str(path.relative_to(REPO)))
    assert importers == []
    assert not list((REPO / "envs").rglob("make_data.py")) and not (REPO / "envs/alfworld/generate.py").exists()
