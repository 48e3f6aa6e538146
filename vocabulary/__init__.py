"""The names the harness and its reports share across the JSON boundary: every closed set of
names as one enum each (``names``) and the mutation score (``score``). It imports nothing of the
project, so ``harness/`` and ``reports/`` (which reads records only) both import it."""

from vocabulary.names import (
    JOB_END,
    PASSING,
    RUN_ENDS,
    STATUS_ORDER,
    Backend,
    Check,
    Decision,
    EntryKind,
    EventKind,
    FailureClass,
    JobStatus,
    KernelEnd,
    Layout,
    Origin,
    Phase,
    Status,
    Verdict,
    WireEvent,
)
from vocabulary.score import mutation_score

__all__ = [
    "JOB_END", "PASSING", "RUN_ENDS", "STATUS_ORDER", "Backend", "Check", "Decision", "EntryKind", "EventKind",
    "FailureClass", "JobStatus", "KernelEnd", "Layout", "Origin", "Phase", "Status", "Verdict", "WireEvent",
    "mutation_score",
]
