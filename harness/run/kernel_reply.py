"""What a kernel call answers the judge, as plain data: the kernel's exception, a value that is
not a tensor, a refused backward, the reply and its timings, a lost kernel process. No torch here:
the judge imports this before torch, so that its kernel process starts up beside it
(harness.run.kernel_process.KernelProcess.start_ahead)."""

from __future__ import annotations

import dataclasses
from typing import Any

from vocabulary import Check


@dataclasses.dataclass
class KernelError:
    """An exception the kernel raised, as plain data (it may have been raised in another process)."""

    type_name: str
    text: str  # str() of the exception
    oob: str | None = None  # harness.run.oob's description of an out-of-bounds access behind it
    rejection: bool = False  # a ValueError, TypeError or NotImplementedError (or a subclass)
    limit: bool = False  # one of SELF_LIMITS (or a subclass): a limit the kernel states itself
    where: str | None = None  # FILE:LINE of the deepest frame in the kernel's own code (raised_at)

    def __str__(self) -> str:
        return self.text

    def describe(self) -> str:
        """``Type: first line (at FILE:LINE)`` and the message's further lines."""
        first, newline, rest = self.text.partition("\n")
        at = f" (at {self.where})" if self.where else ""
        return f"{self.type_name}: {first}{at}{newline}{rest}" if self.text else f"{self.type_name}{at}"


@dataclasses.dataclass
class NotATensor:
    """What the kernel returned instead of a tensor."""

    type_name: str
    text: str

    def describe(self) -> str:
        return "None" if self.type_name == "NoneType" else f"a {self.type_name} ({self.text})"


@dataclasses.dataclass
class Reply:
    value: Any = None
    error: KernelError | None = None
    kernel_s: float = 0.0  # wall time of the call (compile_s included)
    compile_s: float = 0.0
    startup_s: float = 0.0  # starting a fresh kernel process first (start-up, not the case's time)
    launches: int = 0  # Triton kernels the call launched (harness.run.launches)
    specializations: tuple[str, ...] = ()  # the call's new Triton specialization keys (harness.run.specializations)


class KernelLost(Exception):
    """The kernel process ended (``Check.CRASH``) or hung (``Check.TIMEOUT``) during a call.

    ``fatal``: the job cannot go on (a hang, or too many kernel processes lost)."""

    def __init__(self, check: Check, message: str, *, fatal: bool):
        super().__init__(message)
        self.check, self.message, self.fatal = check, message, fatal


@dataclasses.dataclass(frozen=True)
class Refusal:
    """torch (or the kernel's autograd code) refused a backward because an input it keeps was
    changed in place after the forward: the safe answer to that change. ``message``: what it said."""

    message: str
