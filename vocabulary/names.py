"""The harness's vocabulary: every closed set of names it records or sends, one enum each.

Inside the harness members are compared with ``is``; records, reports and event lines hold their
string values (each is a ``str`` enum, so ``Check.CRASH == "crash"``), and only there are strings
turned back into members (``JobStatus(value)``). What each set names:

- ``Check``: the checks every op gets beside its own value checks; ``RUN_ENDS`` among them say how a
  case's run ended and are never waivable (no ``Contract(waive=...)`` may name one).
- ``Phase``: where a record's case came from.
- ``Origin``: where a registered kernel or mutant comes from.
- ``KernelEnd``: how a job's kernel process ended when it did not simply finish; ``JobStatus``: how
  a job ended (``JOB_END`` maps the first to the second: the worker sends a KernelEnd, the pool
  keeps a JobStatus).
- ``WireEvent``: the lines a worker writes to its event file and the pool reads; ``EventKind``:
  what the pool tells its caller; ``Decision``: what the caller tells the pool about a queued job.
- ``Status``: a mutant's outcome in a campaign (``STATUS_ORDER``: the order reports list them in).
- ``Verdict``: a kernel's verdict in verify.json; ``FailureClass``: why a failed kernel failed.
- ``Backend``: where kernels ran; ``EntryKind``: what a registry entry is; ``Layout``: the built-in
  memory layouts of a case's tensors (an op may declare more: a layout stays a string in a case).

This package imports nothing of the project, so every layer can use it, ``reports/`` included.
"""

from __future__ import annotations

import enum


class Check(enum.StrEnum):
    INPUTS_UNCHANGED = "inputs_unchanged"
    OUTPUT_META = "output_meta"
    CONTRACT = "contract"
    REPEATABLE = "repeatable"
    NO_GRAD = "no_grad"
    GRAD_MODES = "grad_modes"
    FRESH_INPUTS = "fresh_inputs"
    CHANGED_INPUT = "changed_input"
    OUT_OF_BOUNDS = "out_of_bounds"
    # how a case's run ended
    CRASH = "crash"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"
    FORGED_EVENT = "forged_event"
    OUT_OF_MEMORY = "out_of_memory"


RUN_ENDS = frozenset({Check.CRASH, Check.TIMEOUT, Check.INTERRUPTED, Check.FORGED_EVENT, Check.OUT_OF_MEMORY})


class Phase(enum.StrEnum):
    """Where a case came from: the op's floor, hypothesis (a generated case, or a shrinking step
    of a failure), an explicit ``--case``; ``crash``: a record the worker pool writes for a job
    whose worker died, hung or was interrupted."""

    FLOOR = "floor"
    GENERATED = "generated"
    SHRUNK = "shrunk"
    EXPLICIT = "explicit"
    CRASH = "crash"


class Origin(enum.StrEnum):
    """Where a registered entry comes from. Reports hold the value; a StrEnum, so it equals its
    string too."""

    PROJECT = "project"  # a kernel of the project's kernels/ package
    PLUGIN = "plugin"  # a kernel or mutant that a --plugin file registers
    CATALOG = "catalog"  # a hand-written mutant of a project kernel (harness.mutation.mutagen.register_catalog)
    GENERATED = "generated"  # a mutant generated from a kernel's source (harness.mutation.mutagen)
    LIBRARY = "library"  # a mutant of a library module's kernel (mutate --mutate-module)
    SANITY = "sanity"  # a forced failure that proves the campaign's sanity rule; never scored
    BASELINE = "baseline"  # a kernel of another revision, paired by verify --baseline
    TEST = "test"  # registered by harness.testing (a kernel's own pytest suite)


class KernelEnd(enum.StrEnum):
    """How a job's kernel process ended when it did not simply finish: it died or it hung."""

    CRASHED = "crashed"
    TIMEOUT = "timeout"


class JobStatus(enum.StrEnum):
    """How a job ended. Reports hold the value (``"ok"``, ...)."""

    OK = "ok"
    CRASHED = "crashed"  # its worker or kernel process died
    TIMEOUT = "timeout"  # its worker or kernel process hung
    INTERRUPTED = "interrupted"  # the run was stopped before the job ended
    SKIPPED = "skipped"  # not run (the caller's ``decide`` said SKIP)
    HARNESS_ERROR = "harness_error"  # the judge's own code raised (the oracle, the error model, a check): no verdict


JOB_END = {KernelEnd.CRASHED: JobStatus.CRASHED, KernelEnd.TIMEOUT: JobStatus.TIMEOUT}


class WireEvent(enum.StrEnum):
    """The lines a worker writes to its event file (harness.execution.worker) and the pool reads
    (harness.execution.workers): one name each, the same on both sides of the pipe."""

    BEGIN = "begin"  # the job reached a live worker
    START = "start"  # a case started (its id)
    RECORD = "record"  # one check's record
    CASE_DONE = "case_done"  # a case ended
    DONE = "done"  # the job ended (how: ``ended``, a KernelEnd value, or none)
    RETIRE = "retire"  # the worker takes no further job


class EventKind(enum.StrEnum):
    CASE = "case"  # a case of the job finished
    DONE = "done"  # the job finished
    SKIPPED = "skipped"  # the job was not run (the caller's ``decide`` said SKIP)


class Decision(enum.StrEnum):
    """What the pool does with a queued job when its turn comes (the caller's ``decide``)."""

    RUN = "run"
    SKIP = "skip"  # not run: it comes back with status ``skipped``
    WAIT = "wait"  # not decided yet: it stays queued while the jobs behind it go ahead


class Status(str, enum.Enum):
    KILLED = "killed"
    SURVIVED = "survived"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    INCOMPETENT = "incompetent"
    EQUIVALENT = "equivalent"

    @property
    def detected(self) -> bool:
        return self in (Status.KILLED, Status.TIMEOUT, Status.CRASHED)

    @property
    def scored(self) -> bool:
        """Whether the mutant counts in the score: an incompetent or equivalent one does not."""
        return self not in (Status.INCOMPETENT, Status.EQUIVALENT)


# the order reports list mutants in: what needs a look first
STATUS_ORDER = (Status.SURVIVED, Status.TIMEOUT, Status.CRASHED, Status.KILLED, Status.INCOMPETENT, Status.EQUIVALENT)


class Verdict(enum.StrEnum):
    """A kernel's verdict in verify.json (reports/verify_report.py says how each is reached)."""

    PASS = "pass"
    PASS_FORWARD_ONLY = "pass (forward only)"  # no gradient checked
    FAIL = "fail"
    NOT_VERIFIED = "not verified"  # nothing failed, but nothing proves the kernel right
    ERROR = "error"  # the harness's own code (or an op's declaration) raised: no verdict on the kernel


PASSING = (Verdict.PASS, Verdict.PASS_FORWARD_ONLY)


class FailureClass(enum.StrEnum):
    """Why a failed kernel failed."""

    PRECISION = "precision"  # every failure within a few roundings of what the error model allows
    REFUSED = "refused"  # every failure a clean refusal of an in-contract case
    ERROR = "error"  # beyond what rounding explains, a crash, a wrong shape, ...
    SHORTCUT = "shortcut"  # it calls the reference (verify --strict)


class Backend(enum.StrEnum):
    """Where kernels run (a report's ``backend``)."""

    CUDA = "cuda"
    INTERPRETER = "interpreter"


class EntryKind(enum.StrEnum):
    """What a registry entry is."""

    KERNEL = "kernel"
    MUTANT = "mutant"


class Layout(enum.StrEnum):
    """The built-in memory layouts of a case's tensors (harness/ops/layouts.py builds them)."""

    CONTIGUOUS = "contiguous"
    TRANSPOSED = "transposed"
    COL_SLICED = "col_sliced"
    OFFSET = "offset"
    PERMUTED = "permuted"
    MIXED = "mixed"
    INDEX_WIDTH_ROWS = "index_width_rows"
    INDEX_WIDTH_COLS = "index_width_cols"
