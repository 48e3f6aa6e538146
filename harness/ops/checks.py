"""The checks every op gets, each a small function returning (passed, message[, comparison]).

The runner (harness.run.runner) calls them in order on one case; each result becomes one record.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from harness.compare.allclose import Comparison, bitwise_equal, compare
from harness.registry.opspec import Meta
from harness.compare.tolerances import Tolerance

REJECTIONS = (ValueError, TypeError, NotImplementedError)


def values(
    actual: Any, expected64: torch.Tensor, dtype: torch.dtype, tol: Tolerance, magnitude: torch.Tensor | None = None,
    nan_ok: torch.Tensor | None = None, limit: torch.Tensor | None = None,
) -> Comparison:
    """allclose of ``actual`` against the oracle rounded to the output dtype (as a kernel must round);
    ``nan_ok``: where a NaN is accepted too; ``limit``: the oracle's limit where it is NaN from an
    infinite input, rounded the same way (harness.compare.allclose.compare, harness.compare.nonfinite)."""
    expected = expected64.to(dtype) if expected64.dtype != dtype else expected64
    if limit is not None and limit.dtype != dtype:
        limit = limit.to(dtype)
    return compare(actual, expected, atol=tol.atol, rtol=tol.rtol, magnitude=magnitude, terms_rtol=tol.terms_rtol,
                   in_dtype=dtype, nan_ok=nan_ok, limit=limit)


class Snapshot:
    """The bytes of every storage behind the given tensors, padding of views included. A storage
    of more than ``COMPACT_BYTES`` that holds one fill value but for a few elements (an
    index-width case's: about 2**31 elements of NaN or -1 around a small view) is kept as that
    value plus the other elements' positions and values (``_Sparse``), not as a copy: with the
    17 GB copy of a target's storage, a cross-entropy case found no room on an 80 GB H100 beside
    the other workers (docs/gpu-runs.md, run 69)."""

    def __init__(self, named: Sequence[tuple[str, torch.Tensor]]):
        self.named = [(n, t) for n, t in named if isinstance(t, torch.Tensor)]
        self.saved = [_Sparse.of(t) or t.untyped_storage().clone() for _, t in self.named]

    def changes(self, skip: Sequence[str] = ()) -> list[str]:
        """What changed, per tensor; ``skip``: names written by design (Contract(inplace=...))."""
        out = []
        for (name, t), before in zip(self.named, self.saved):
            if name in skip:
                continue
            if isinstance(before, _Sparse):
                out.extend(before.changes(name, t))
                continue
            now = t.untyped_storage()
            a = torch.tensor([], dtype=torch.uint8, device=now.device).set_(before)
            b = torch.tensor([], dtype=torch.uint8, device=now.device).set_(now)
            if a.numel() != b.numel():
                out.append(f"{name}: storage resized from {a.numel()} to {b.numel()} bytes")
                continue
            count, first = _changed_bytes(a, b)
            if count:
                inside = _byte_in_view(t, first)
                where = "inside the view" if inside else "outside the view (padding of its storage)"
                out.append(f"{name}: {count} byte(s) changed, first at storage byte {first}, {where}")
        return out


CHUNK_BYTES = 1 << 28
COMPACT_BYTES = 1 << 30  # storages past this are kept as a fill value and exceptions where they can be
COMPACT_SHARE = 64  # ... when at most one element in this many differs from the fill
_WORDS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


class _Sparse:
    """A storage kept as one fill word and the positions and words of the elements that differ
    from it, compared word by word (bit patterns: a NaN fill compares equal to itself)."""

    def __init__(self, nbytes: int, word: torch.dtype, fill: torch.Tensor, where: torch.Tensor, was: torch.Tensor):
        self.nbytes, self.word, self.fill, self.where, self.was = nbytes, word, fill, where, was

    @staticmethod
    def _words(t: torch.Tensor, word: torch.dtype) -> torch.Tensor:
        return torch.tensor([], dtype=torch.uint8, device=t.device).set_(t.untyped_storage()).view(word)

    @classmethod
    def of(cls, t: torch.Tensor) -> "_Sparse | None":
        nbytes, size = t.untyped_storage().nbytes(), t.element_size()
        if nbytes <= COMPACT_BYTES or size not in _WORDS or nbytes % size:
            return None
        words = cls._words(t, _WORDS[size])
        n = words.numel()  # the fill: the commonest of 31 words spread over the storage (a view's rows
        picks = torch.tensor([int(n * ((k * 0.6180339887) % 1.0)) for k in range(1, 32)], device=t.device)
        fill = torch.mode(words[picks].to(torch.int64)).values.to(words.dtype)  # sit at regular strides)
        where = []
        for start in range(0, words.numel(), CHUNK_BYTES // size):
            found = (words[start:start + CHUNK_BYTES // size] != fill).nonzero().flatten() + start
            where.append(found)
            if sum(w.numel() for w in where) * COMPACT_SHARE > words.numel():
                return None  # not one fill value around a few elements: a plain copy
        where = torch.cat(where) if where else torch.empty(0, dtype=torch.long, device=t.device)
        return cls(nbytes, _WORDS[size], fill, where, words[where].clone())

    def changes(self, name: str, t: torch.Tensor) -> list[str]:
        if t.untyped_storage().nbytes() != self.nbytes:
            return [f"{name}: storage resized from {self.nbytes} to {t.untyped_storage().nbytes()} bytes"]
        words, step = self._words(t, self.word), CHUNK_BYTES // t.element_size()
        count, first = 0, -1
        for start in range(0, words.numel(), step):
            chunk = words[start:start + step]
            diff = chunk != self.fill
            mine = (self.where >= start) & (self.where < start + chunk.numel())
            at = self.where[mine] - start
            diff[at] = chunk[at] != self.was[mine]
            n = int(diff.sum().item())
            if n and first < 0:
                first = start + int(diff.nonzero()[0].item())
            count += n
        if not count:
            return []
        byte = first * t.element_size()
        where = "inside the view" if _byte_in_view(t, byte) else "outside the view (padding of its storage)"
        return [f"{name}: {count} element(s) of {t.element_size()} bytes changed, first at storage byte {byte}, {where}"]


def _changed_bytes(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int]:
    """(how many bytes differ, the first that does), compared in chunks: the storage of an
    index-width case (harness.ops.layouts) spans GBs, and a mask over all of it would cost as
    much again."""
    count, first = 0, -1
    for start in range(0, a.numel(), CHUNK_BYTES):
        diff = a[start:start + CHUNK_BYTES] != b[start:start + CHUNK_BYTES]
        n = int(diff.sum().item())
        if n and first < 0:
            first = start + int(diff.nonzero()[0].item())
        count += n
    return count, first


def _byte_in_view(t: torch.Tensor, byte: int) -> bool:
    size = t.element_size()
    elem = byte // size - t.storage_offset()
    if elem < 0:
        return False
    # brute force over the view's element offsets; views in cases are small enough
    idx = torch.zeros((), dtype=torch.long, device="cpu")
    for d, (n, s) in enumerate(zip(t.shape, t.stride())):
        idx = (idx.unsqueeze(-1) + torch.arange(n, device="cpu") * s).reshape(-1)
    return bool((idx == elem).any().item())


def inputs_unchanged(snapshot: Snapshot, phase: str, written: Sequence[str] = ()) -> tuple[bool, str]:
    """No input changed, except ``written``: the buffers the contract declares written in place."""
    changes = snapshot.changes(written)
    declared = f" (written by design: {', '.join(written)})" if written else ""
    if changes:
        return False, f"inputs modified during {phase}: " + "; ".join(changes) + declared
    return True, f"inputs unchanged after {phase}{declared}"


def output_meta(name: str, actual: Any, meta: Meta, device: torch.device) -> tuple[bool, str]:
    """Shape, dtype and device of one output or gradient."""
    if not isinstance(actual, torch.Tensor):
        return False, f"{name}: expected a tensor, got {type(actual).__name__}"
    problems = []
    if tuple(actual.shape) != tuple(meta.shape):
        problems.append(f"shape {tuple(actual.shape)} != {tuple(meta.shape)}")
    if actual.dtype != meta.dtype:
        problems.append(f"dtype {actual.dtype} != {meta.dtype}")
    if actual.device.type != device.type:
        problems.append(f"device {actual.device} != {device}")
    if problems:
        return False, f"{name}: " + ", ".join(problems)
    return True, f"{name}: shape {tuple(meta.shape)}, {str(meta.dtype).removeprefix('torch.')}, {device.type}"


def contract_rejection(error: BaseException | None, reasons: Sequence[str], snapshot: Snapshot,
                       self_limits: bool = False) -> tuple[bool, str]:
    """An out-of-contract case must raise ValueError/TypeError/NotImplementedError, inputs untouched;
    a kernel declaring ``Contract(self_limits=True)`` states its limits with ``assert`` too, so an
    AssertionError is a rejection of it as well."""
    why = "; ".join(reasons)
    changed = snapshot.changes()
    if error is None:
        return False, f"accepted out-of-contract input ({why}): the kernel returned instead of raising"
    # a KernelError (harness.run.kernel_host) describes an exception raised in the kernel's process
    name = getattr(error, "type_name", type(error).__name__)
    rejected = getattr(error, "rejection", isinstance(error, REJECTIONS))
    if self_limits:
        rejected = rejected or getattr(error, "limit", isinstance(error, REJECTIONS + (AssertionError,)))
    if not rejected:
        expected = "ValueError, TypeError, NotImplementedError or AssertionError" if self_limits else \
            "ValueError, TypeError or NotImplementedError"
        return False, f"out-of-contract input ({why}) raised {name}: {error}; expected {expected}"
    if changed:
        return False, f"rejected out-of-contract input ({why}) but modified its inputs first: " + "; ".join(changed)
    return True, f"rejected ({why}) with {name}: {str(error)[:200]}"


# a clean refusal: one of these raised with a message before any launch, the inputs unchanged
# (RuntimeError: what Liger-Kernel and unsloth raise past their block size; a CUDA error is none)
REFUSALS = ("ValueError", "TypeError", "NotImplementedError", "AssertionError", "RuntimeError")


def refusal(reply, snapshot: Snapshot) -> str | None:
    """The exception's type where a kernel's raise on an in-contract case is a clean refusal, an
    unsupported input said in words before anything was written (None: it is not one)."""
    error = reply.error
    if error is None or error.type_name not in REFUSALS or not error.text.strip() or error.oob is not None:
        return None
    if reply.launches or snapshot.changes() or "CUDA error" in error.text:
        return None
    return error.type_name


def self_limit_problem(reply, snapshot: Snapshot, declared: bool) -> str:
    """Why a kernel's raise on an in-contract case is not a limit it states itself ('' if it is):
    with ``Contract(self_limits=True)`` a ValueError, TypeError, NotImplementedError or
    AssertionError raised before any Triton launch, the inputs unchanged (harness.run.runner)."""
    error = reply.error
    if not declared:
        return ""
    if not getattr(error, "limit", False):
        return "; not a stated limit (Contract(self_limits=True) takes ValueError, TypeError, NotImplementedError or AssertionError)"
    if reply.launches:
        return (f"; after launching {reply.launches} Triton kernel(s): a limit stated with Contract(self_limits=True) "
                "is checked before any launch")
    changed = snapshot.changes()
    if changed:
        return "; after modifying its inputs (" + "; ".join(changed) + "): a limit is checked before any write"
    return ""


# how repeatable() begins where the runs' outputs differ in kind (missing, shape, dtype), not in bits
UNLIKE_RUNS = "two runs on the same inputs returned different outputs"


def _kind(value) -> str:
    """A run's output in a few words: its shape and dtype, or what it was instead of a tensor."""
    if isinstance(value, torch.Tensor):
        return f"shape {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return "no tensor" if value is None else type(value).__name__


def repeatable(first: Sequence[torch.Tensor], second: Sequence[torch.Tensor], names: Sequence[str]) -> tuple[bool, str]:
    """Two runs on the same inputs give the same bits."""
    differing, unlike = [], []
    for name, a, b in zip(names, first, second):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
                unlike.append(f"{name}: {_kind(a)}, then {_kind(b)}")
            continue
        if a.shape != b.shape or a.dtype != b.dtype:
            unlike.append(f"{name}: {_kind(a)}, then {_kind(b)}")
            continue
        equal, count = bitwise_equal(a, b)
        if not equal:
            differing.append(f"{name}: {count} element(s) differ")
    if unlike:  # not a race: what a call returns depends on something other than its inputs
        return False, (UNLIKE_RUNS + ": " + "; ".join(unlike + differing) +
                       ". What a kernel returns must depend only on its inputs, never on the calls before it "
                       "(a workspace or a flag kept between calls)")
    if differing:
        return False, ("two runs on the same inputs differ: " + "; ".join(differing) +
                       ". Usually a race: programs or warps that read memory another one writes without an "
                       "order (a missing barrier, a plain load + add + store where atomics are needed), or "
                       "an atomic accumulation whose order changes the rounding. A kernel nondeterministic by design "
                       "(atomics) declares it: Contract(deterministic=False)")
    return True, "two runs bitwise identical"
