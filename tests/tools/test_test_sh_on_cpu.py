"""tools/test.sh, CI's test command: it lists the slowest tests, and fails when pytest collects none."""

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_test_sh(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(ROOT / "tools" / "test.sh"), "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_log_lists_the_slowest_tests(tmp_path):
    (tmp_path / "test_a.py").write_text("import time\n\ndef test_sleeps():\n    time.sleep(0.05)\n")
    out = run_test_sh(str(tmp_path / "test_a.py"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "slowest 25 durations" in out.stdout and "test_a.py::test_sleeps" in out.stdout, out.stdout


def test_no_test_collected_fails(tmp_path):
    (tmp_path / "test_none.py").write_text("X = 1\n")
    out = run_test_sh(str(tmp_path / "test_none.py"))
    assert out.returncode == 1 and "collected no tests" in out.stderr, out.stdout + out.stderr
