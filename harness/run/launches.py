"""How many Triton kernels this process has launched: what tells a kernel's own rejection of an
input before any work (``Contract(self_limits=True)``, harness.run.runner) from one after it.

Counts calls of ``JITFunction.run`` and ``InterpretedFunction.run`` (every ``fn[grid](...)``
launch, an autotuner's included), chained once per process. The project's ``kernels._launch``
fast path on CUDA calls a cached launcher directly after a kernel's first launch; the first
launch of each kernel is still counted.
"""

from __future__ import annotations

import functools

_state = {"installed": False, "count": 0, "observers": []}


def observe(observer) -> None:
    """Also call ``observer(kernel, args, kwargs)`` on every launch (harness.run.specializations);
    an observer that raises never fails the launch."""
    install()
    if observer not in _state["observers"]:
        _state["observers"].append(observer)


def install() -> None:
    if _state["installed"]:
        return
    _state["installed"] = True
    try:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:  # pragma: no cover - an older Triton: nothing counted
        return
    for cls in (JITFunction, InterpretedFunction):
        run = cls.run

        @functools.wraps(run)
        def counted(self, *args, _run=run, **kwargs):
            _state["count"] += 1
            for observer in _state["observers"]:
                try:
                    observer(self, args, kwargs)
                except Exception:  # a cost figure or a count: never the reason a launch fails
                    pass
            return _run(self, *args, **kwargs)

        cls.run = counted


def count() -> int:
    """Launches so far in this process."""
    return _state["count"]
