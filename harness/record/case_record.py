"""The record of one check on one case: what compare() found, plus where it came from.

Reports and tests read these records and nothing else.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vocabulary import Phase


@dataclasses.dataclass
class CaseRecord:
    op: str
    kernel: str
    check: str
    case_id: str
    shape: list[list[int]]  # shape of each tensor input, in argument order
    dtype: str
    layout: str
    passed: bool
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    atol: float | None = None
    rtol: float | None = None
    mismatched: int | None = None
    worst_index: list[int] | None = None
    repro: str = ""
    # extensions
    err_ratio: float | None = None
    numel: int | None = None
    message: str = ""
    phase: Phase = Phase.FLOOR
    seconds: float | None = None
    specializations: list[str] | None = None  # first record of a case: the Triton keys its kernel calls launched
    timing: dict | None = None  # first record of a case: seconds in kernel calls, oracle, checks
    # a failure the kernel declares deliberate (Contract(waive={check: reason})): the reason; such
    # a record has passed=True so no gate fails on it, and every report shows it as "waived"
    waived: str | None = None
    # verify --baseline, on value checks: {identical, max_ulps, share_base, share_head} (harness.baseline)
    baseline: dict | None = None
    # a failure made of value comparisons only: its worst error in roundings of the terms
    # (harness.compare.allclose); what tells a precision choice from a logic error
    rounding_units: float | None = None
    # a value check widened by the kernel's Contract(precision=...): the declaration and what it adds
    declared_precision: str | None = None
    # an in-contract case the kernel rejected itself (Contract(self_limits=True)): its exception
    self_limited: str | None = None
    # an in-contract case the kernel refused cleanly (a clear exception before any launch, inputs
    # unchanged) while no declaration states that limit: the exception's type; still a failure,
    # classed "refused" (reports.verify_report.failure_class)
    refused: str | None = None
    # a case the judge could not run to its end for want of GPU memory that other processes held
    # (check ``out_of_memory``): neither passed nor failed; the kernel is "not verified" on it
    inconclusive: str | None = None
    # on the forward record: the kernel hands the whole computation to the reference (harness.shortcut;
    # the kernel process found it); the kernel's summary carries it as ``shortcut``
    shortcut: str | None = None

    def __post_init__(self) -> None:
        self.phase = Phase(self.phase)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["phase"] = self.phase.value  # reports hold plain strings
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
