"""How a process ended, in words, for every message that reports it (the launcher's, the
worker pool's, the judge's); and how a helper process ends once its work is handed over.
Standard library only: the launcher imports it before torch."""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["describe_exit", "end_now"]


def describe_exit(code: int | None) -> str:
    """``exited with status N``, ``was killed by SIGKILL``, or ``stopped answering`` (no code)."""
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def end_now(code: int) -> None:
    """End this process with ``code`` once its standard streams are flushed, without Python's
    teardown: with torch and Triton loaded that costs about 0.4 CPU-s, on the path of the process
    waiting for this one. Only for a process whose work has been handed over (its reply sent, its
    events written) and that holds no file of its own still to close."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
