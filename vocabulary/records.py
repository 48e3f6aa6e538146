"""The schema of what the reports read: a case record and a kernel summary of verify.json, a
mutant of mutation.json. Their field names and values are a contract for outside tools; the
writers (harness.record, harness.verify, harness.mutation) and the readers (``reports/``) both
take them from here, so that a field is spelled once.

- :class:`CaseRecord`: one check on one case (``cases`` of verify.json).
- :class:`KernelSummary`: one kernel's verdict and counts (``kernels`` of verify.json), computed
  from its case records by reports.verify_report.kernel_summary; reports read them back through
  ``kernel_summaries`` (``kernel_summary_from_json``).
- :class:`MutantRecord`: one mutant's outcome (``mutants`` of mutation.json).
- :class:`CaseStatus`: what a case record amounts to for a check (a kernel summary's ``checks``
  counts them).
- ``PRECISION_UNITS``: the worst error, in roundings of the terms (a record's ``rounding_units``),
  that a precision choice explains; past it an error is a logic error.
- ``REJECTIONS``, ``SELF_LIMITS``: the exception names that refuse a case cleanly (a record's ``refused``).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, TypedDict

from vocabulary.names import Phase, Status

PRECISION_UNITS = 8.0
# the exceptions (by type name, as a record's ``refused`` holds it) that answer an out-of-contract
# case; SELF_LIMITS: what a kernel declaring Contract(self_limits=True) may raise to state a limit
REJECTIONS = ("ValueError", "TypeError", "NotImplementedError")
SELF_LIMITS = REJECTIONS + ("AssertionError",)


class CaseStatus(enum.StrEnum):
    """What one case record amounts to."""

    PASSED = "passed"
    FAILED = "failed"
    WAIVED = "waived"  # a failure the kernel declares deliberate (Contract(waive=...))
    INCONCLUSIVE = "inconclusive"  # the judge could not run the case (out of GPU memory)


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
    # (harness.compare.measure); what tells a precision choice from a logic error (PRECISION_UNITS)
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

    @property
    def status(self) -> CaseStatus:
        return case_status(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["phase"] = self.phase.value  # reports hold plain strings
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def case_status(record: dict) -> CaseStatus:
    """What a case record (as verify.json holds it) amounts to."""
    if record.get("waived"):
        return CaseStatus.WAIVED
    if record.get("inconclusive"):
        return CaseStatus.INCONCLUSIVE
    return CaseStatus.PASSED if record.get("passed") else CaseStatus.FAILED


class KernelSummary(TypedDict, total=False):
    """A kernel's entry in verify.json's ``kernels`` (reports.verify_report.kernel_summary writes it;
    the verify session adds where the kernel came from and how long it ran)."""

    op: str
    name: str
    passed: bool
    verdict: str  # a Verdict value
    forward_only: bool
    failure_class: str | None  # a FailureClass value, on a failed kernel
    unverified_reason: str | None
    value_comparisons: int
    value_checks: list[str] | None
    cases: int
    failed: int
    waived: int
    waivers: dict[str, str]
    stale_waivers: list[str]
    self_limited: dict | None
    refused: dict | None
    status: str  # a JobStatus value: how the kernel's job ended
    checks: dict[str, dict[str, int]]  # check -> CaseStatus value -> records
    worst_err_ratio: float | None
    time_breakdown: dict[str, float]
    specializations: int
    shortcut: str | None
    origin: str
    contract: dict
    plugin: str
    seconds: float
    worker_seconds: float
    shards: int
    harness_error: str | None  # the judge's own code raised (verdict ``error``): what it said
    reused: dict  # a verdict reused from the incremental store: its key and when it was saved
    strict: bool  # failed under --strict as a shortcut (harness.shortcut.apply_strict)


KERNEL_SUMMARY_REQUIRED = ("op", "name", "passed", "cases", "failed")  # kernel_summary always writes them


def kernel_summary_from_json(data: dict[str, Any]) -> KernelSummary:
    """A kernel's entry of verify.json as the typed view the reports read: the one place that
    checks the JSON against ``KernelSummary``. A required field missing (renamed by a writer, or a
    file of another harness version) fails here, by name, instead of reading as absent wherever it
    is used. A field the schema does not name is carried through: verify.json may be extended (by
    a newer harness or an outside tool) without breaking a report; that the harness's own writers
    stay within the schema is held by tests (tests/test_vocabulary_records.py)."""
    missing = [name for name in KERNEL_SUMMARY_REQUIRED if name not in data]
    if missing:
        who = f"{data.get('op', '?')}/{data.get('name', '?')}"
        raise ValueError(f"verify.json: kernel {who}: missing field(s) {', '.join(missing)}: not a "
                         "vocabulary.records.KernelSummary (a report written by another version of the harness? "
                         "run verify again)")
    return KernelSummary(**data)


def kernel_summaries(report: dict[str, Any]) -> list[KernelSummary]:
    """The ``kernels`` of a verify report (verify.json), each read through kernel_summary_from_json."""
    return [kernel_summary_from_json(k) for k in report.get("kernels", [])]


@dataclasses.dataclass(frozen=True)
class MutantRecord:
    """A mutant's entry in mutation.json's ``mutants``. The library fields (``module`` and after) are
    written for a mutant of a library module only, ``reused_from`` for an outcome reused from an
    earlier campaign only."""

    op: str
    name: str
    origin: str  # an Origin value
    operator: str | None
    location: str | None
    diff: str
    description: str
    status: Status
    detected: bool
    killed_by: dict | None  # {check, case_id, repro, ...}
    seconds: float
    note: str
    gpu: str | None
    specializations: int
    module: str | None = None
    function: str | None = None
    kernel: str | None = None
    fingerprint: str | None = None
    reused_from: str | None = None

    LIBRARY = ("module", "function", "kernel", "fingerprint")

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["status"] = Status(self.status).value
        if self.module is None:
            for name in self.LIBRARY:
                del data[name]
        if not self.reused_from:
            del data["reused_from"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "MutantRecord":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{**{k: v for k, v in data.items() if k in names}, "status": Status(data["status"])})
