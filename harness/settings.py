"""Where the project lives, and the tunables of the engine, in one place.

A tunable is a number the engine could take otherwise without changing what a verdict
means: a time budget, a default amount of work, a cadence, how much a message lists. Every
one is a field of ``Settings`` with its default and why it has that value; the engine reads
them through ``current()`` (the defaults, with ``verify --watchdog`` applied). Numbers that
are facts stay beside the code they describe: the tutorial's published figures and bench
protocol, the rounding model's constants, dtype tables. The mutation side's limits are
constants of harness/mutation.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from vocabulary import Backend

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Settings:
    """The engine's tunables.

    Watchdog of the judge (harness.execution.worker) and its kernel process: a kernel call
    that has not replied within ``max(base, factor * slowest completed call)`` seconds is a
    hang: the judge kills the kernel process and records ``timeout`` for the case. The base
    covers the first calls (imports, Triton's first compilation on CUDA); the scaled part lets
    big cases take their time once one of them has been seen.
    """

    # the judge and its kernel process (harness.run.kernel_process)
    watchdog_base_interpreter_s: float = 60.0
    watchdog_base_cuda_s: float = 300.0  # the first launches compile every kernel variant
    watchdog_factor: float = 20.0
    startup_s: float = 600.0  # a kernel process's start (imports, plugins, mutant modules) and its first bind
    kernel_restarts: int = 5  # kernel processes that may die in one job before its other cases are not run

    # the worker pool (harness.execution.jobs)
    job_timeout_s: float = 1800.0  # a job (one kernel's suite) with no result by then is killed: `verify --timeout`
    poll_s: float = 0.05  # how often the pool reads the workers' event files and polls their processes

    # one kernel's suite (harness.run.suite)
    verify_max_examples_interpreter: int = 30  # generated cases after the floor, verify's default per backend
    verify_max_examples_cuda: int = 200
    shrink_budget_s: float = 60.0  # time spent shrinking a generated failure before the smallest so far is kept
    # the floor cases whose later calls run on the interpreter: "cover" (harness.run.suite.later_cover) or
    # "all" (every case, as on CUDA: four times the interpreter's verify); HARNESS_LATER_CALLS=all
    later_calls_interpreter: str = "cover"

    # progress in a log (harness.execution.progress)
    summary_every_s: float = 10.0  # a count of finished jobs per class (mutate)
    running_line_every_s: float = 15.0  # a line for the running job (verify)

    # sanitize (harness.cli.sanitize)
    sanitize_timeout_s: float = 300.0  # per kernel and tool: `sanitize --timeout`
    sanitize_max_case_bytes: int = 8 * 2**20  # input bytes of a driven case: compute-sanitizer slows calls 100x

    # messages
    failures_listed: int = 20  # failed checks in assert_kernel's AssertionError
    oob_spans_listed: int = 8  # tensor arguments named in an out-of-bounds message

    # benchmark (harness.workflows.benchmark)
    bench_copy_bytes: int = 1 << 30  # the device-to-device copy that measures the bandwidth ceiling

    def watchdog_base(self, backend: str) -> float:
        return self.watchdog_base_cuda_s if backend == Backend.CUDA else self.watchdog_base_interpreter_s

    def max_examples(self, backend: str) -> int:
        """verify's (and assert_kernel's, and the pytest plugin's) default count of generated cases."""
        return self.verify_max_examples_cuda if backend == Backend.CUDA else self.verify_max_examples_interpreter


DEFAULTS = Settings()

WATCHDOG_ENV = "HARNESS_WATCHDOG_S"  # overrides the base of both backends (verify --watchdog sets it)
LATER_CALLS_ENV = "HARNESS_LATER_CALLS"  # "all": the later calls on every floor case of the interpreter too


def current() -> Settings:
    """The settings of this process: the defaults, with the watchdog base and the interpreter's
    later calls from the environment."""
    settings = DEFAULTS
    value = os.environ.get(WATCHDOG_ENV)
    if value:
        seconds = float(value)
        settings = dataclasses.replace(settings, watchdog_base_interpreter_s=seconds, watchdog_base_cuda_s=seconds)
    later = os.environ.get(LATER_CALLS_ENV)
    if later and later not in ("cover", "all"):
        from harness.errors import UsageError

        raise UsageError(f"{LATER_CALLS_ENV}={later!r}: say 'cover' (the default) or 'all'")
    if later:
        settings = dataclasses.replace(settings, later_calls_interpreter=later)
    return settings
