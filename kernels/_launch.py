"""Launching a ``@triton.jit`` kernel with less host time on CUDA.

At small sizes (RMSNorm at 128x257 moves 0.26 MB, about 2 us of GPU work) the time of a call is
the host's: ``fn[grid](*args)`` runs ``JITFunction.run`` on every call, which builds the cache key
as a string of the options, checks that no global the kernel read has changed, and builds launch
metadata, before it calls the compiled kernel's launcher.

``launch(fn, grid, *args, **kwargs)`` does what ``fn[grid](*args, **kwargs)`` does with less of it:

- the specialisation comes from Triton's own binder, the function ``JITFunction.run`` calls, so
  pointer alignment, divisibility by 16 and integers equal to 1 specialise exactly as Triton
  decides; the binder's specialisation and options are the key;
- on the first call of a key it calls ``fn.run``, which compiles (or finds) and launches the
  kernel, and keeps the ``CompiledKernel`` it returns, on ``fn`` itself (a mutant's or a reloaded
  module's functions are new objects with caches of their own, freed with them);
- on a later call it calls that kernel's launcher with the current stream, as ``run`` does.

What it skips: the check that the kernel's globals are unchanged (the project's kernels read
constants only) and the launch metadata, which Triton builds only for a launch hook.

It takes the standard path whenever the fast one could differ: the interpreter (no device
caches), a pre-run hook, a launch hook (profilers such as proton set one), an asynchronous
compile (a future instead of a kernel), or a Triton whose internals are not as expected.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

try:  # Triton >= 3.3
    from triton import knobs
    from triton.runtime import driver
except ImportError:  # pragma: no cover - older Triton: always the standard path
    knobs = driver = None

_CACHE = "_project_launch_cache"


def _hooked(hook: Any) -> bool:
    """A launch hook is set: a callable, or a non-empty HookChain (Triton >= 3.5 always holds a
    chain, empty unless a profiler added to it)."""
    calls = getattr(hook, "calls", None)
    return bool(calls) if calls is not None else hook is not None


def _fast_path_possible(fn: Any) -> bool:
    return (
        knobs is not None
        and getattr(fn, "device_caches", None) is not None
        and not getattr(fn, "pre_run_hooks", True)
        and not _hooked(knobs.runtime.launch_enter_hook)
        and not _hooked(knobs.runtime.launch_exit_hook)
    )


def launch(fn: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
    """``fn[grid](*args, **kwargs)``, with a cached compiled kernel on CUDA (module docstring)."""
    if not _fast_path_possible(fn):
        fn[grid](*args, **kwargs)
        return
    kwargs["debug"] = kwargs.get("debug", fn.debug) or knobs.runtime.debug
    kwargs["instrumentation_mode"] = knobs.compilation.instrumentation_mode
    device = driver.active.get_current_device()
    try:
        binder = fn.device_caches[device][4]
        bound, specialization, options = binder(*args, **kwargs)
        key = (device, tuple(specialization), tuple(options.items()))
        cache = fn.__dict__.setdefault(_CACHE, {})
        kernel = cache.get(key)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        fn[grid](*args, **kwargs)  # internals not as expected: the standard path
        return
    if kernel is None:
        compiled = fn.run(*args, grid=grid, warmup=False, **kwargs)
        if compiled is not None and not hasattr(compiled, "result"):
            cache[key] = compiled
        return
    kernel.run(
        grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1,
        driver.active.get_current_stream(device), kernel.function, kernel.packed_metadata,
        None, None, None, *bound.values(),
    )


@functools.lru_cache(maxsize=None)
def _multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def multiprocessors(device: torch.device) -> int:
    """The CUDA device's multiprocessor count, asked once per device (the query costs host time on
    every backward otherwise)."""
    return _multiprocessors(device.index if device.index is not None else torch.cuda.current_device())


def rows_per_program(rows: int, block: int, device: torch.device) -> int:
    """Rows of one program's [ROWS, BLOCK] tiles in a row-wise kernel: several where a row is narrow.

    On a GPU a tile stays at 2048 elements and 16 rows at most, so a row of 2048 columns or more
    keeps one program per row (the plan the LLM-size figures were measured with). In the
    interpreter each program runs one after another with Python overhead per operation, so wider
    tiles cut the programs of a many-row, narrow case (257 rows of 7 columns: 257 programs -> 5).
    A power of two (a tile's shape), never above the rows' own next power of two.
    """
    budget, most = (2048, 16) if device.type == "cuda" else (4096, 64)
    return max(1, min(most, budget // block, 1 << max(rows - 1, 0).bit_length()))


SPECIALIZE_ALL = "HARNESS_SPECIALIZE_ALL"  # =1: runtime_args keeps nothing out (bench's "before")


def runtime_args(*names: str) -> dict[str, tuple[str, ...]]:
    """``triton.jit`` keyword arguments that keep ``names`` (sizes, strides, pointers) out of the
    compile key: Triton otherwise compiles once per pattern of values equal to 1, divisible by 16
    or 16-byte aligned, so a kernel called with many layouts and sizes compiles again and again.

    The row-wise kernels keep only values of the row dimension out (row counts, per-row vectors'
    strides, ignore_index): the contiguous dimension's size and the row strides stay specialized,
    since Triton vectorizes a load only where it can prove the mask constant and the address
    aligned over the vector. With ``HARNESS_SPECIALIZE_ALL=1`` in the environment when a kernel
    module is imported, nothing is kept out: the same kernels as specialized as Triton makes them,
    for timing the two side by side on a GPU (docs/perf-notes.md)."""
    import inspect
    import os

    import triton

    if os.environ.get(SPECIALIZE_ALL) == "1":
        return {}

    options = {"do_not_specialize": names}
    if "do_not_specialize_on_alignment" in inspect.signature(triton.jit).parameters:
        options["do_not_specialize_on_alignment"] = names
    return options
