"""harness/cases/command.py and verify's --case: a printed repro line is a command that runs as
printed, from any directory and whatever `python` is on PATH, and a repro writes to its own report
folder (reports/repro), never over the full run's. Bug class: a repro that ends in a traceback, or
that replaces the report it came from."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cases.case import Case, repro_command
from harness.cases.command import console_words

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "plugins" / "quickstart_rmsnorm.py"


def test_repro_names_the_console_script_and_the_plugin_by_full_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    case = Case.parse("rmsnorm:M=1,N=7,dtype=float32,layout=contiguous,values=normal,eps=1e-06,seed=1")
    words = shlex.split(repro_command(case, kernel="k", backend="interpreter", plugins=("../p.py",)))
    assert os.path.isabs(words[0]) and words[:len(console_words())] == list(console_words())
    assert words[words.index("--plugin") + 1] == str(tmp_path.parent / "p.py")


def _plain_shell_env() -> dict:
    """A user's shell: no TRITON_INTERPRET, and a `python` on PATH that is not the venv's."""
    env = {k: v for k, v in os.environ.items() if k not in ("TRITON_INTERPRET", "VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    return env


@pytest.mark.slow
def test_printed_repro_runs_as_printed_elsewhere_and_keeps_the_full_report(tmp_path):
    env = _plain_shell_env()
    full = subprocess.run([*console_words(), "verify", "--plugin", str(PLUGIN), "--select", "my_rmsnorm_bug",
                           "--backend", "interpreter", "--max-examples", "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert full.returncode == 1, full.stdout[-2000:] + full.stderr[-2000:]
    kept = (tmp_path / "reports" / "out" / "verify.json").read_bytes()
    line = next(ln.split("repro: ", 1)[1] for ln in full.stdout.splitlines() if "repro: " in ln)
    case = shlex.split(line)[shlex.split(line).index("--case") + 1]
    # pasted into a shell, in the directory of the full run (not the checkout)
    repro = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert repro.returncode == 1, repro.stdout[-2000:] + repro.stderr[-2000:]
    assert "Traceback" not in repro.stderr and "FAIL my_rmsnorm_bug" in repro.stdout
    assert (tmp_path / "reports" / "out" / "verify.json").read_bytes() == kept  # the full run's report is intact
    one = json.loads((tmp_path / "reports" / "repro" / "verify.json").read_text())
    assert {c["case_id"] for c in one["cases"]} == {case}
    assert "report: reports/repro/verify.json" in repro.stdout
