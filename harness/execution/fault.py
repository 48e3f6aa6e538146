"""A failure of the judge's own code, described for the reports: never the kernel's.

The judge (harness.execution.worker) never calls a kernel: the kernel's answers, its exceptions
included, come back as replies of its kernel process. So an exception that reaches the judge's job
loop was raised by the harness (case construction, the oracle, the error model, a comparison)
or by an op's declaration that a user wrote (a plugin's ``OpDecl`` or ``from_reference``: its
reference, terms or magnitudes). Either way the job has no verdict: the pool ends it as
``JobStatus.HARNESS_ERROR``, verify gives the kernel ``verdict: "error"`` and exits 3, the campaign
refuses to score, and nothing is recorded against the kernel or a mutant.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_HARNESS_DIRS = tuple(str(ROOT / d) + os.sep for d in ("harness", "properties", "oracles", "reports"))
_LIBRARIES = tuple(p for p in {sys.prefix, sys.base_prefix, sys.exec_prefix} if p)


def _is_library(filename: str) -> bool:
    return "site-packages" in filename or "dist-packages" in filename or filename.startswith("<") \
        or any(filename.startswith(p + os.sep + "lib") for p in _LIBRARIES)


def _short(filename: str) -> str:
    try:
        return str(Path(filename).resolve().relative_to(ROOT))
    except ValueError:
        return filename


def describe(exc: BaseException, job: dict, case_id: str | None) -> dict:
    """What the reports say of a harness error: the exception, the innermost frame of the harness
    (``where``), and, when that frame is in a file the user wrote (a plugin or a reference problem:
    an op's declaration), that file (``declaration``) with the op it declares."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _is_library(f.filename)]
    own = [f for f in frames if str(Path(f.filename).resolve()).startswith(_HARNESS_DIRS)]
    user = [f for f in frames if f not in own]
    try:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    except Exception:  # an exception whose __str__ raises
        text = "(its message could not be printed)"
    inner = frames[-1] if frames else None
    fault = {
        "message": f"{type(exc).__name__}: {text}"[:600],
        "where": f"{_short(own[-1].filename)}:{own[-1].lineno}" if own else None,
        "case_id": case_id,
        "op": job.get("op"),
        "declaration": None,
    }
    if inner is not None and user and inner is user[-1]:  # the innermost frame is the user's declaration
        fault["declaration"] = f"op {job.get('op')!r} declared in {_short(inner.filename)}:{inner.lineno}"
    fault["summary"] = summary(fault)
    return fault


def summary(fault: dict) -> str:
    """One line: who failed, where, on which case, and the exception."""
    who = f"the declaration of {fault['declaration']}" if fault.get("declaration") else "the harness"
    where = f" at {fault['where']}" if fault.get("where") and not fault.get("declaration") else ""
    case = f" on case {fault['case_id']}" if fault.get("case_id") else " before any case ran"
    return f"ERROR (harness): {who} raised{where}{case}: " \
           f"{fault.get('message', '')} (no verdict: this is not the kernel's failure)"
