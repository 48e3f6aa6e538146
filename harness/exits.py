"""How a process ended, in words, for every message that reports it (the launcher's, the
worker pool's, the judge's). Standard library only: the launcher imports it before torch."""

from __future__ import annotations

import signal

__all__ = ["describe_exit"]


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
