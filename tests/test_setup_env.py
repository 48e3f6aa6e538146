"""scripts/setup_env.sh (make setup): the project itself is installed into .venv, so that
.venv/bin/triton-verify (the command every repro line starts with) runs and `import harness` works
from any directory; on an interpreter it reuses (the GPU image, no network) without pip; a second
run changes nothing. Bug class: a repro line or a pytest file outside the checkout that cannot
find the harness."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv" / "bin"
SKIP = shutil.ignore_patterns(".venv", ".git", "reports", ".hypothesis", ".pytest_cache", "__pycache__", "build",
                              "*.egg-info", "tests", "docs", "examples", "shared", "out")


def _run(cmd, cwd, **env):
    return subprocess.run(cmd, cwd=cwd, env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(not (VENV / "python").exists(), reason="make setup has not run in this checkout")
def test_this_checkouts_venv_has_the_console_script_and_imports_the_harness_anywhere(tmp_path):
    where = _run([str(VENV / "python"), "-c", "import harness; print(harness.__file__)"], tmp_path)
    assert where.stdout.strip() == str(ROOT / "harness" / "__init__.py"), where.stderr
    helped = _run([str(VENV / "triton-verify"), "verify", "--help"], tmp_path)
    assert helped.returncode == 0 and "--case" in helped.stdout, helped.stderr


def test_setup_reusing_an_interpreter_needs_no_pip_and_is_idempotent(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT, copy, ignore=SKIP)
    # the machine's python3 already has every package (the GPU image): it is reused, nothing is installed
    first = _run(["bash", "scripts/setup_env.sh"], copy, PYTHON=sys.executable, PIP_NO_INDEX="1")
    assert first.returncode == 0 and "reusing" in first.stdout, first.stdout + first.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(copy / ".venv/bin/python"), "-c", "import harness; print(harness.__file__)"], elsewhere)
    assert where.stdout.strip() == str(copy / "harness" / "__init__.py"), where.stderr
    helped = _run([str(copy / ".venv/bin/triton-verify"), "--help"], elsewhere)
    assert helped.returncode == 0 and "verify" in helped.stdout, helped.stderr
    before = {p.name: p.stat().st_mtime_ns for p in (copy / ".venv" / "bin").iterdir()}
    again = _run(["bash", "scripts/setup_env.sh"], copy, PYTHON=sys.executable, PIP_NO_INDEX="1")
    assert again.returncode == 0 and again.stdout == "", again.stdout + again.stderr  # the fast path: nothing to do
    assert {p.name: p.stat().st_mtime_ns for p in (copy / ".venv" / "bin").iterdir()} == before
