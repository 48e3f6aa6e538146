"""One index-width case at a time per GPU, across every worker process on the machine.

An index-width case (harness.ops.layouts) holds a storage of about 2^31 elements, plus its
float64 reference: about 26 GB for an fp32 case. Eight workers sharing one H200 (141 GB) that
reach such cases together would run out of memory, and an out-of-memory error inside a case
reads as the kernel's failure. So a worker takes an exclusive lock on a file named after the
GPU (its UUID, shared by every process that sees the device, whatever CUDA_VISIBLE_DEVICES
says) for the whole case, and gives the memory back to the device (harness.ops.layouts.release)
before it lets the next one in. Other cases never wait, but one that leaves more than
``KEEP_CACHED`` bytes in this process's allocator cache gives them back too (with the kernel
process's), so that the workers' caches, idle between large cases, do not fill the device an
index-width case needs (an 80 GB H100 ran out that way beside seven workers).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from pathlib import Path
from typing import Callable, Iterator

from harness.ops import layouts
from vocabulary import Backend

KEEP_CACHED = 2 << 30  # bytes of cached, unused GPU memory a worker may keep after a case


def _trim(release_host: Callable[[], None]) -> None:
    import torch

    from harness.run.kernel_host import give_back_memory

    if torch.cuda.is_initialized() and torch.cuda.memory_reserved() > KEEP_CACHED:
        release_host()
        give_back_memory()


def lock_path() -> Path:
    """The lock file of the current CUDA device, the same for every process on the machine."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    name = str(getattr(props, "uuid", "")) or f"visible-{os.environ.get('CUDA_VISIBLE_DEVICES', 'all')}-{torch.cuda.current_device()}"
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
    return Path(tempfile.gettempdir()) / f"triton-verify-index-width-{safe}.lock"


@contextlib.contextmanager
def exclusive(case, backend: str, release_host: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Hold the GPU's index-width lock while an index-width case runs on CUDA; otherwise nothing.
    Before the next one gets in, this process and, through ``release_host``, the kernel process
    give their GPU memory back: the case's inputs, the kernel's outputs and saved graph, and the
    allocator's cached blocks (harness.run.kernel_host.Session.release)."""
    if backend != Backend.CUDA:
        yield
        return
    if not layouts.is_index_width(case):
        try:
            yield
        finally:
            _trim(release_host)
        return
    with open(lock_path(), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            release_host()
            layouts.release()
            fcntl.flock(fh, fcntl.LOCK_UN)
