"""Seconds this process spends compiling Triton kernels, from Triton's own JIT hooks.

``triton.knobs.runtime.jit_cache_hook`` runs when a launch misses the in-memory kernel cache,
just before Triton compiles (or loads a binary from its disk cache), and
``jit_post_compile_hook`` right after. The clock adds up the time between the two, so the
runner can split a case's kernel calls into compilation and execution (``_Phases``). Hooks a
user set before are kept and still called. Without the hooks (an older Triton, or the
interpreter, which compiles nothing) the clock stays at 0.
"""

from __future__ import annotations

import time

_state = {"installed": False, "seconds": 0.0, "count": 0, "open": []}


def install() -> bool:
    """Chain the clock onto Triton's JIT hooks once per process; False where Triton has none."""
    if _state["installed"]:
        return True
    try:
        from triton import knobs

        runtime = knobs.runtime
        previous_pre, previous_post = runtime.jit_cache_hook, runtime.jit_post_compile_hook
    except (ImportError, AttributeError):
        return False

    def pre(*args, **kwargs):
        del _state["open"][:-16]  # compiles that raised never reach ``post``: drop their starts
        _state["open"].append(time.perf_counter())
        return previous_pre(*args, **kwargs) if previous_pre else None  # a truthy result skips the compile

    def post(*args, **kwargs):
        if _state["open"]:
            _state["seconds"] += time.perf_counter() - _state["open"].pop()
            _state["count"] += 1
        return previous_post(*args, **kwargs) if previous_post else None

    runtime.jit_cache_hook, runtime.jit_post_compile_hook = pre, post
    _state["installed"] = True
    return True


def seconds() -> float:
    """Compilation seconds so far in this process (a compile that raised is not counted)."""
    return _state["seconds"]


def compiled() -> int:
    return _state["count"]
