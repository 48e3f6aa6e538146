"""Where kernels run: a CUDA GPU, or the Triton interpreter on the CPU.

The interpreter is chosen by TRITON_INTERPRET=1, which Triton reads when it is first
imported, so :func:`select` must run before anything imports triton.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import sys
import warnings

from harness.errors import UsageError
from vocabulary import Backend as BackendName

AUTO = "auto"
BACKENDS = (AUTO, *BackendName)
# the torch device each backend runs on
DEVICE = {BackendName.CUDA: "cuda", BackendName.INTERPRETER: "cpu"}


@dataclasses.dataclass(frozen=True)
class Backend:
    name: BackendName
    device: str  # torch device string (DEVICE)

    @property
    def is_interpreter(self) -> bool:
        return self.name == BackendName.INTERPRETER

    def describe(self) -> dict:
        """What every report records about where it ran."""
        import torch
        import triton

        if self.name == BackendName.CUDA:
            device_name = torch.cuda.get_device_name(torch.cuda.current_device())
        else:
            device_name = f"CPU ({platform.processor() or platform.machine()}, Triton interpreter)"
        return {
            "backend": self.name,
            "device": device_name,
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "triton": triton.__version__,
                "hypothesis": _version("hypothesis"),
                "cuda": torch.version.cuda,
            },
        }


def _version(module: str) -> str | None:
    try:
        return __import__(module).__version__
    except Exception:  # a missing optional package only leaves a blank in the report
        return None


def _gpu_visible() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def interpret_without_gpu() -> bool:
    """Set ``TRITON_INTERPRET=1`` when torch sees no GPU and the environment does not say
    otherwise, so that the kernels decorated from now on run through the interpreter (Triton reads
    it when ``@triton.jit`` decorates a kernel). For a process about to import user kernels
    (the pytest plugin, harness.testing); True when the interpreter is chosen."""
    if "TRITON_INTERPRET" in os.environ:
        return os.environ["TRITON_INTERPRET"] == "1"
    if _gpu_visible():
        return False
    os.environ["TRITON_INTERPRET"] = "1"
    return True


def select(name: str) -> Backend:
    """Resolve ``auto|cuda|interpreter`` and prepare the process for it."""
    if name not in BACKENDS:
        raise UsageError(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    interpret_requested = os.environ.get("TRITON_INTERPRET") == "1"
    if name == AUTO:
        name = BackendName.INTERPRETER if interpret_requested or not _gpu_visible() else BackendName.CUDA
    if name == BackendName.CUDA:
        if interpret_requested:
            raise UsageError("--backend cuda conflicts with TRITON_INTERPRET=1 in the environment; unset it")
        if not _gpu_visible():
            raise UsageError("--backend cuda: no CUDA GPU is visible to torch; use --backend interpreter or auto")
        return _of(BackendName.CUDA)
    if "triton" in sys.modules and not interpret_requested:
        raise UsageError(
            "the Triton interpreter must be chosen before triton is imported; "
            "run with --backend interpreter from a fresh process or set TRITON_INTERPRET=1"
        )
    os.environ["TRITON_INTERPRET"] = "1"
    return _of(BackendName.INTERPRETER)


def current() -> Backend:
    """The backend this process was prepared for (the interpreter if TRITON_INTERPRET=1)."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        return _of(BackendName.INTERPRETER)
    return _of(BackendName.CUDA)


def _of(name: BackendName) -> Backend:
    return Backend(name, DEVICE[name])


@contextlib.contextmanager
def quiet_interpreter_arithmetic():
    """numpy's overflow and invalid-value warnings from inside the Triton interpreter, silenced:
    they are the kernel's arithmetic on the suite's huge and non-finite inputs, judged by the
    checks, not news (printed, they read as the harness's own trouble)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"triton\.runtime\.interpreter")
        yield
