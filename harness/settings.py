"""Where the project lives, and the tunables of the engine, in one place."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Settings:
    """Tunables of the judge (harness.execution.worker) and its kernel process.

    A kernel call that has not replied within ``max(base, factor * slowest completed call)``
    seconds is a hang: the judge kills the kernel process and records ``timeout`` for the
    case. The base covers the first calls (imports, Triton's first compilation on CUDA);
    the scaled part lets big cases take their time once one of them has been seen.
    """

    watchdog_base_interpreter_s: float = 60.0
    watchdog_base_cuda_s: float = 300.0  # the first launches compile every kernel variant
    watchdog_factor: float = 20.0
    startup_s: float = 600.0  # a kernel process's start (imports, plugins, mutant modules) and its first bind
    kernel_restarts: int = 5  # kernel processes that may die in one job before its other cases are not run

    def watchdog_base(self, backend: str) -> float:
        return self.watchdog_base_cuda_s if backend == "cuda" else self.watchdog_base_interpreter_s


WATCHDOG_ENV = "HARNESS_WATCHDOG_S"  # overrides the base of both backends (verify --watchdog sets it)


def current() -> Settings:
    """The settings of this process: the defaults, with the watchdog base from the environment."""
    value = os.environ.get(WATCHDOG_ENV)
    if not value:
        return Settings()
    seconds = float(value)
    return Settings(watchdog_base_interpreter_s=seconds, watchdog_base_cuda_s=seconds)
