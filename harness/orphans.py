"""No harness process outlives the process that started it.

A run stopped hard (``timeout -s KILL``, a CI job cancelled, the OOM killer) kills one process;
its children would go on running kernels for nobody, holding the report folder's lock and the
GPU. Each child asks Linux for a signal when its parent dies (``PR_SET_PDEATHSIG``). Standard
library only: the launcher imports it before torch.
"""

from __future__ import annotations

import os
import signal

__all__ = ["die_with_parent"]

_PR_SET_PDEATHSIG = 1


def die_with_parent(signum: int = signal.SIGKILL, parent: int | None = None) -> None:
    """Have ``signum`` sent to this process when its parent dies (Linux; a no-op elsewhere). With
    ``parent`` (its pid, read before the fork) a parent that died already sends it at once."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signum))
    except (OSError, AttributeError):
        return  # elsewhere the pipes' ends still stop the children that read them
    if parent is not None and os.getppid() != parent:
        os.kill(os.getpid(), signum)
