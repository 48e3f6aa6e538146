"""What the code under test sees of the kernel process: nothing that names the harness.

A candidate that computes right only when it sees it is being verified (a ``harness`` module in
``sys.modules``, a harness frame on the stack, a harness environment variable, the harness in
``sys.argv``) would pass a verification and fail its users. So in the kernel process every call
of user code that matters (the import of a KernelBench candidate, ModelNew's construction, every
kernel call, every backward) runs through :func:`call`:

- on a thread of its own (``Runner``), whose frames are the standard library's ``threading``
  and one trampoline compiled under the neutral file name ``<kernel>``: no harness frame lies
  above the user's code (the harness thread waits on a queue meanwhile);
- with every module of the harness's packages (``HIDDEN``) out of ``sys.modules`` for the call,
  put back after it (a module the call imported under those names is dropped again);
- in a process whose environment holds no variable of the harness (``scrub_environment``, at
  the kernel process's start) and whose ``sys.argv`` is a bare interpreter's.

A harness function the user's code runs inside (KernelBench's wrapper around ModelNew) is
called as a copy whose code and globals carry neutral names (:func:`function`).

Grad mode and inference mode are per thread in torch: the runner's call enters the caller's.
"""

from __future__ import annotations

import dis
import os
import queue
import sys
import threading
import types
from pathlib import Path
from typing import Any, Callable

NEUTRAL_FILE = "<kernel>"
HIDDEN = ("harness", "vocabulary", "properties", "oracles", "reports", "hypothesis")  # the harness's packages; its case generator
_HARNESS_DIR = str(Path(__file__).resolve().parent.parent)

_TRAMPOLINE = compile('''
def serve(inbox, outbox):
    import torch

    while True:
        job = inbox.get()
        if job is None:
            return
        (inference, grad), fn, args, kwargs = job
        del job
        try:
            with torch.inference_mode() if inference else torch.enable_grad() if grad else torch.no_grad():
                outbox.put((True, fn(*args, **kwargs)))
        except BaseException as exc:
            outbox.put((False, exc))
        del fn, args, kwargs
''', NEUTRAL_FILE, "exec")


class Runner:
    """One thread that runs user code with a neutral stack; ``call`` blocks until it returns."""

    def __init__(self) -> None:
        scope = {"__name__": "__main__", "__builtins__": __builtins__}
        exec(_TRAMPOLINE, scope)
        self.inbox: queue.SimpleQueue = queue.SimpleQueue()
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=scope["serve"], args=(self.inbox, self.outbox), daemon=True,
                                       name="Thread-1")
        self.thread.start()

    def call(self, fn: Callable, args: tuple, kwargs: dict) -> Any:
        import torch

        modes = torch.is_inference_mode_enabled(), torch.is_grad_enabled()  # per thread in torch: the caller's
        saved = _hide_modules()
        try:
            self.inbox.put((modes, fn, args, kwargs))
            ok, value = self.outbox.get()
        finally:
            _restore_modules(saved)
        if ok:
            return value
        raise value


_RUNNER: list[Runner] = []


def install() -> None:
    """Make this process's :func:`call` neutral (the kernel process, before it loads user code)."""
    if not _RUNNER:
        _RUNNER.append(Runner())


def call(fn: Callable, *args, **kwargs) -> Any:
    """``fn(*args, **kwargs)``: through the neutral runner where one is installed, else here."""
    if not _RUNNER:
        return fn(*args, **kwargs)
    return _RUNNER[0].call(fn, args, kwargs)


def bind(fn: Callable) -> Callable:
    """A callable that runs ``fn`` (neutralised by :func:`function`) through :func:`call`."""
    target = function(fn)

    def through(*args, **kwargs):
        return call(target, *args, **kwargs)

    return through


def function(fn: Callable) -> Callable:
    """``fn`` itself, or, for a function defined in the harness's source, a copy whose code
    says ``<kernel>`` and whose globals are a module named ``__main__`` with no file."""
    code = getattr(fn, "__code__", None)
    if not isinstance(fn, types.FunctionType) or not code.co_filename.startswith(_HARNESS_DIR + os.sep):
        return fn
    if _writes_globals(code):  # its module's globals must stay the ones it writes: only the code is renamed
        scope = fn.__globals__
    else:  # a snapshot: such a wrapper reads modules and functions there, never state another rebinds
        scope = dict(fn.__globals__, __name__="__main__", __spec__=None, __loader__=None, __package__=None,
                     __doc__=None)
        scope.pop("__file__", None)
    copy = types.FunctionType(code.replace(co_filename=NEUTRAL_FILE), scope, fn.__name__, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__, copy.__doc__, copy.__qualname__ = fn.__kwdefaults__, None, fn.__name__
    copy.__module__ = "__main__"
    return copy


def _writes_globals(code: types.CodeType) -> bool:
    if any(i.opname in ("STORE_GLOBAL", "DELETE_GLOBAL") for i in dis.get_instructions(code)):
        return True
    return any(isinstance(c, types.CodeType) and _writes_globals(c) for c in code.co_consts)


def _hidden(name: str) -> bool:
    return name.split(".", 1)[0] in HIDDEN


def _hide_modules() -> dict:
    saved = {name: module for name, module in list(sys.modules.items()) if _hidden(name)}
    for name in saved:
        del sys.modules[name]
    return saved


def _restore_modules(saved: dict) -> None:
    for name in [n for n in list(sys.modules) if _hidden(n) and n not in saved]:
        del sys.modules[name]  # imported by the call under a harness name: a stray copy
    sys.modules.update(saved)


def scrub_environment() -> dict[str, str]:
    """Remove the harness's variables (and pytest's) from this process's environment; the removed
    ones, for the harness's own set-up that still needs them."""
    removed = {k: v for k, v in os.environ.items() if "HARNESS" in k.upper() or k.startswith("PYTEST_")}
    for k in removed:
        del os.environ[k]
    return removed


def scrub_argv() -> None:
    """A bare interpreter's ``sys.argv`` (spawn gave this process its parent's, the judge's)."""
    sys.argv[:] = [os.path.basename(sys.executable) or "python"]
