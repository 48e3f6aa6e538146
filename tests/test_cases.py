"""harness.cases.case: stable ids that round-trip, and a repro command that names the case."""

import os
import shlex

import pytest

from harness.cases.case import Case, repro_command
from harness.errors import UsageError


def test_id_round_trips():
    c = Case.of("rmsnorm", M=17, N=257, dtype="float16", layout="transposed", values="tiny", eps=1e-06, seed=3)
    assert c.id == "rmsnorm:M=17,N=257,dtype=float16,layout=transposed,values=tiny,eps=1e-06,seed=3"
    assert Case.parse(c.id) == c


def test_bad_ids_are_usage_errors():
    for text in ("rmsnorm", ":M=1", "rmsnorm:M"):
        with pytest.raises(UsageError):
            Case.parse(text)


def test_parameters_cannot_break_the_id():
    with pytest.raises(ValueError):
        Case.of("op", layout="a,b")
    with pytest.raises(TypeError):
        Case.of("op", flag=True)


def test_repro_names_kernel_case_backend_and_plugin():
    c = Case.of("rmsnorm", M=1, N=1)
    cmd = repro_command(c, kernel="k", backend="interpreter", plugins=("my plugin.py",))
    assert "--case rmsnorm:M=1,N=1" in cmd and "--select k" in cmd and "--backend interpreter" in cmd
    assert shlex.quote(os.path.abspath("my plugin.py")) in cmd  # by full path, quoted: runs from any directory
