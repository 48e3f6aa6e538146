"""The pytest plugin: registered kernels' cases as pytest items (-k, -n, --junitxml work)."""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from floors import rmsnorm_floor
from harness.cases.command import console_words

CLI = " ".join(console_words())  # the console script that starts every repro line

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = ROOT / "examples" / "plugins"
# small: the fp32 contiguous cases of the floor (the two bugs show there) and 2 generated cases
SMALL = ["--verify-max-examples", "2", "-k", "float32 and contiguous"]


def _pytest(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "harness.pytest_plugin", "-p", "no:cacheprovider", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _collected(*args) -> list[str]:
    proc = _pytest("--collect-only", "-q", *args)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line for line in proc.stdout.splitlines() if "::" in line]


def test_collection_is_the_same_every_time_and_holds_floor_and_generated_cases():
    args = ["--verify-plugin", str(PLUGINS / "tutorial_rmsnorm.py"), "--verify-max-examples", "3"]
    first, second = _collected(*args), _collected(*args)
    assert first == second  # what every xdist worker relies on
    floor = len(rmsnorm_floor())
    assert len(first) == floor + 3 and all("tutorial_rmsnorm[rmsnorm:M=" in item for item in first)
    assert len(_collected("--verify-plugin", str(PLUGINS / "tutorial_rmsnorm.py"), "--verify-max-examples", "0")) == floor


@pytest.mark.slow
def test_bugs_fail_item_by_item_with_verify_text_and_junit(tmp_path):
    junit = tmp_path / "junit.xml"
    proc = _pytest("--verify-plugin", str(PLUGINS / "tutorial_rmsnorm_bugs.py"), *SMALL, "-n", "2", "--junitxml", str(junit))
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-2000:]
    assert re.search(r"FAILED examples/plugins/tutorial_rmsnorm_bugs.py::tutorial_div_by_block\[rmsnorm:M=\d+,N=257,", out)
    assert "FAILED examples/plugins/tutorial_rmsnorm_bugs.py::tutorial_dgamma_mean[rmsnorm:" in out
    # verify's text: headline with check and case id, allclose lines, repro command
    assert re.search(r"FAIL tutorial_div_by_block forward rmsnorm:M=\d+,N=257,dtype=float32", out)
    assert "Mismatched elements:" in out and f"repro: {CLI} verify --op rmsnorm --select tutorial_dgamma_mean" in out
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    passed = [c.get("name") for c in cases if c.find("failure") is None and c.find("skipped") is None]
    assert any(n.startswith("tutorial_dgamma_mean[rmsnorm:") for n in failed)
    assert passed, "cases where a bug does not show (N = 256) pass"


@pytest.mark.slow
def test_correct_kernel_passes():
    proc = _pytest("--verify-plugin", str(PLUGINS / "tutorial_rmsnorm.py"), *SMALL, "-n", "2")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "failed" not in proc.stdout


def test_bad_plugin_is_one_usage_line(tmp_path):
    proc = _pytest("--verify-plugin", str(tmp_path / "missing.py"))
    assert proc.returncode == 4 and "triton-verify: plugin file not found" in proc.stderr and "Traceback" not in proc.stderr
