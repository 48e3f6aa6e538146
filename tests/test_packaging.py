"""`pip install .` gives the console script `triton-verify` (the CLI of `python -m harness`, through harness.launcher) and
the pytest11 entry point; the wheel carries every subpackage and the data files the engine reads."""

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".venv", ".git", "reports/out", ".hypothesis", ".pytest_cache", "__pycache__", "build",
                              "*.egg-info", "tests", "docs", "shared", "out")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # build from a copy: setuptools writes build/ and *.egg-info next to the sources
    src = tmp_path_factory.mktemp("src") / "triton-verify"
    shutil.copytree(ROOT, src, ignore=SKIP)
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    (whl,) = out.glob("triton_verify-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_declares_the_console_script_and_the_pytest_plugin(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (ep,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = configparser.ConfigParser()
        entry_points.read_string(z.read(ep).decode())
    assert entry_points["console_scripts"]["triton-verify"] == "harness.launcher:main"
    assert entry_points["pytest11"]["harness.pytest_plugin"] == "harness.pytest_plugin"
    for package in ("harness", "harness/cli", "harness/run", "harness/execution", "harness/registry", "harness/compare",
                    "harness/record", "harness/mutation", "harness/workflows", "harness/cases", "harness/ops", "properties",
                    "properties/ops", "properties/mutants", "kernels", "oracles", "reports", "bench"):
        assert f"{package}/__init__.py" in names, package
    for data in ("reports/templates/index.html.j2", "properties/mutants/equivalent.toml", "harness/pytest_plugin.py",
                 "harness/testing.py"):
        assert data in names, data


@pytest.mark.slow
def test_installed_package_runs_outside_the_checkout(wheel, tmp_path):
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    env = dict(os.environ, PYTHONPATH=str(target))
    env.pop("TRITON_INTERPRET", None)
    where = subprocess.run([sys.executable, "-c", "import harness, properties.ops, kernels; print(harness.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert where.stdout.strip().startswith(str(target)), where.stdout + where.stderr  # not the checkout
    helped = subprocess.run([sys.executable, "-m", "harness", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert helped.returncode == 0 and "verify" in helped.stdout and "mutate" in helped.stdout, helped.stderr
    script = (target / "bin" / "triton-verify").read_text()
    assert "from harness.launcher import main" in script
    # the op specs and kernels are found from the installed package: verify's own selection error lists them
    listed = subprocess.run([sys.executable, "-m", "harness", "verify", "--backend", "interpreter", "--select", "nothing_*"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert listed.returncode == 2 and "triton_rmsnorm" in listed.stderr and "triton_flce" in listed.stderr, listed.stderr
