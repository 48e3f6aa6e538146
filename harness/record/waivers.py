"""Declared deviations: a kernel's ``Contract(waive={check: reason})`` applied to its records.

A waived failure is neither passed nor failed: its record keeps the failure's message, gets the
reason in ``waived`` and ``passed=True`` (so no gate, shrink or mutant verdict turns on it), and
every report shows it as waived. Failures of checks that a kernel often fails on purpose name
the declaration that would accept them, so the fix for a deliberate choice is one line away.
"""

from __future__ import annotations

from typing import Iterable

from vocabulary.records import CaseRecord

# checks whose failure is often a library's deliberate choice rather than a bug
DELIBERATE = ("all_ignored", "output_meta")


def declaration(check: str, reason: str = "why") -> str:
    """The Contract text that waives ``check``."""
    if check == "repeatable":
        return "Contract(deterministic=False)"
    return f"Contract(waive={{{check!r}: {reason!r}}})"


def apply(records: Iterable[CaseRecord], waive: dict[str, str]) -> None:
    """Mark the failures of waived checks; point other deliberate-looking failures at the declaration."""
    for record in records:
        if record.passed:
            continue
        reason = waive.get(record.check)
        if reason is not None:
            record.passed, record.waived = True, reason
            record.message = f"waived by {declaration(record.check, reason)}: {record.message}"
        elif record.check in DELIBERATE:
            record.message += f" (a deliberate choice of the kernel? declare it: {declaration(record.check)})"
