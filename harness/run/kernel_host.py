"""Kernel calls behind one small interface: in this process, or in a kernel process of its own.

The runner (harness.run.runner) never calls a kernel directly; it asks a host for four
things: ``contract_call(args)`` (an out-of-contract case: call, report the exception or its
absence), ``forward(args, grad_wrt)`` (keeps the autograd graph on the kernel's side),
``backward(upstream)`` and ``repeat(args, grad_wrt, upstream)`` (a second forward and
backward). Each answer is a :class:`Reply`: the value (outputs are never handed over with
their graph), or the error the kernel raised, and the seconds the call spent running and
compiling (harness.run.compile_clock), measured where the kernel ran.

- :class:`InProcessHost` calls the function here. For tests, exercise and the sanitizer:
  places where the caller trusts the kernel.
- :class:`ProcessHost` runs the kernel in a separate process (harness.run.kernel_process),
  so that nothing a kernel does (``sys.exit``, ``os._exit``, a signal, patching the
  harness's modules) can reach the process that judges it. A call that kills that process
  raises :class:`KernelLost`; so does one that outlives the watchdog (harness.settings).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import torch

from vocabulary import Check, KernelEnd
from vocabulary.records import REJECTIONS, SELF_LIMITS
from harness.run import backend, compile_clock, interpreter_casts, launches, specializations
from harness.run.oob import find_out_of_bounds
from harness.run.kernel_reply import KernelError, KernelLost, NotATensor, Refusal, Reply  # noqa: F401  (their home for the callers)

# the autograd modes of Session.grad_mode: a forward with autograd enabled, one under torch.inference_mode
GRAD_MODES = ("autograd", "inference")


def error_of(exc: BaseException) -> KernelError:
    oob = find_out_of_bounds(exc)
    names = [c.__name__ for c in type(exc).__mro__ if c.__module__ == "builtins"]
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ raises still gets reported
        text = "(its message could not be printed)"
    return KernelError(type(exc).__name__, text[:4000], str(oob) if oob is not None else None,
                       any(n in REJECTIONS for n in names), any(n in SELF_LIMITS for n in names), raised_at(exc))


def raised_at(exc: BaseException) -> str | None:
    """FILE:LINE of the deepest traceback frame in the kernel's own code: a file that is neither
    the harness's, an installed package's (torch, triton: also the interpreter running a
    @triton.jit body, whose own frames are the kernel file's) nor the standard library's."""
    import sysconfig

    from harness.settings import PROJECT_ROOT

    skip = [str(PROJECT_ROOT / "harness"), *{sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}]
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:  # the interpreter re-raises a @triton.jit body's error
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    for link in reversed(chain):  # the innermost first: where it began
        where, tb = None, link.__traceback__
        while tb is not None:
            file = tb.tb_frame.f_code.co_filename
            if not file.startswith("<") and not any(file.startswith(p) for p in skip if p) and "-packages" not in file:
                where = f"{file}:{tb.tb_lineno}"
            tb = tb.tb_next
        if where:
            return where
    return None


def output_of(value: Any) -> Any:
    """A tensor output without its graph (a tuple of tensors: each, for an op of several outputs),
    or a NotATensor saying what came instead."""
    if isinstance(value, torch.Tensor) and value.layout == torch.strided:
        return value.detach()
    if isinstance(value, tuple) and value and all(isinstance(v, torch.Tensor) and v.layout == torch.strided
                                                  for v in value):
        return tuple(v.detach() for v in value)
    text = repr(value) if value is not None else ""
    return NotATensor(type(value).__name__, text[:200])


def poison_allocator(device: torch.device, nbytes: int) -> None:
    """Fill memory the caching allocator will hand out next with NaN bytes (0xFF), so an
    output element a kernel forgets to write reads as NaN instead of a lucky zero."""
    if device.type != "cuda" or nbytes <= 0:
        return
    block = torch.empty(nbytes * 2 + 4096, dtype=torch.uint8, device=device)
    block.fill_(0xFF)
    del block


def give_back_memory() -> None:
    """Free what nothing references any more and return this process's cached CUDA blocks."""
    import gc

    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.ipc_collect()  # storages shared with another process that it has let go
        torch.cuda.empty_cache()


class Session:
    """The kernel's side of a case: calls ``fn``, keeps the leaves and output of the last
    forward for the backward, times each call. Never raises for what the kernel does
    (``catch``: the exceptions turned into a KernelError; the kernel process catches all)."""

    def __init__(self, fn: Callable, catch: tuple[type[BaseException], ...] = (Exception, SystemExit),
                 grad: Callable = torch.autograd.grad):
        # grad: what takes the backward (the kernel process's goes through harness.run.neutral, as fn does)
        self.fn, self.catch, self.grad = fn, catch, grad
        self.args: tuple = ()
        self.leaves: list = []
        self.out: Any = None
        compile_clock.install()
        launches.install()
        specializations.install()
        if backend.current().is_interpreter:
            interpreter_casts.install()

    def _timed(self, call: Callable[[], Any], device: torch.device) -> Reply:
        started, compiled, launched = time.perf_counter(), compile_clock.seconds(), launches.count()
        reply = Reply()
        try:
            reply.value = call()
            if device.type == "cuda":
                torch.cuda.synchronize()
        except self.catch as exc:  # the kernel's failure is the answer, not the host's
            reply.error = error_of(exc)
        reply.kernel_s = time.perf_counter() - started
        reply.compile_s = min(reply.kernel_s, compile_clock.seconds() - compiled)
        reply.launches = launches.count() - launched
        reply.specializations = specializations.drain()
        return reply

    def contract_call(self, args: tuple) -> Reply:
        reply = self._timed(lambda: self.fn(*args), _device(args))
        reply.value = None  # only the raise (or its absence) matters
        return reply

    def forward(self, args: tuple, grad_wrt: tuple[int, ...]) -> Reply:
        device = _device(args)

        def call():
            poison_allocator(device, _nbytes(args))
            self.args, self.leaves = args, list(args)
            for i in grad_wrt:
                self.leaves[i] = args[i].detach().requires_grad_(True)
            self.out = None
            self.out = self.fn(*self.leaves)
            return output_of(self.out)

        return self._timed(call, device)

    def backward(self, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None) -> Reply:
        device = _device(self.leaves)

        def call():
            poison_allocator(device, _nbytes(self.leaves))
            return _gradients(self.out, self.leaves, grad_wrt, upstream, self.grad)

        return self._timed(call, device)

    def release(self) -> None:
        """Drop the last case's leaves and output (its autograd graph) and give this process's
        cached GPU memory back to the device: after an index-width case the graph and the
        allocator's poisoned blocks span tens of GB that the other workers on the GPU need."""
        self.args, self.leaves, self.out = (), [], None
        give_back_memory()

    def repeat(self, args: tuple, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None) -> Reply:
        first = self.forward(args, grad_wrt)
        if first.error is not None or not grad_wrt:
            first.value = (first.value, ())
            return first
        second = self.backward(grad_wrt, upstream)
        return Reply((first.value, second.value), second.error, first.kernel_s + second.kernel_s,
                     first.compile_s + second.compile_s)

    def refill(self, values: tuple, grad_wrt: tuple[int, ...], grad_wrt_b: tuple[int, ...],
               upstream: torch.Tensor | None, earlier_upstream: torch.Tensor | None) -> Reply:
        """Calls that share the kernel's state, after the case's own: (A) a forward on copies of
        the last forward's inputs (same strides), its graph kept; the last forward's own tensors
        (same storages) refilled in place with ``values``; (B) a forward on them under
        torch.no_grad, then with grad for ``grad_wrt_b`` only; A's backward (``earlier_upstream``),
        then B's. Value: (B's no-grad output, A's output, A's gradients, B's output, B's gradients,
        whether the output of the call before A changed meanwhile)."""
        kept = self.out  # the kernel's own output of the last call: no later call may write into it
        # (unless it is one of the inputs, written in place: refilling them rewrites it)
        before = [k.detach().clone() if isinstance(k, torch.Tensor) and not _aliases(k, self.args) else None
                  for k in _tensors(kept)]
        device = _device(self.args)
        leaves_a = _copies(self.args, grad_wrt)
        a_fwd = self._timed(lambda: self.fn(*leaves_a), device)
        if a_fwd.error is not None:
            return a_fwd
        out_a = a_fwd.value
        with torch.no_grad():
            for a, v in zip(self.args, values):
                if isinstance(a, torch.Tensor):
                    a.copy_(v)

        def inference():
            with torch.no_grad():
                out = output_of(self.fn(*self.args))
                if isinstance(out, tuple):  # several outputs: each one as a single one
                    out = tuple(o.clone() if _aliases(o, self.args) else o for o in out)
                elif isinstance(out, torch.Tensor) and _aliases(out, self.args):
                    out = out.clone()  # written into an input by design: B's forward writes there again
                for a, v in zip(self.args, values):  # B starts from the values, whatever the call wrote
                    if isinstance(a, torch.Tensor):
                        a.copy_(v)
            return out

        replies = [a_fwd, self._timed(inference, device), self.forward(self.args, grad_wrt_b)]
        grads_a: tuple = ()
        if grad_wrt and replies[-1].error is None:
            replies.append(self._timed(lambda: _gradients(out_a, leaves_a, grad_wrt, earlier_upstream, self.grad), device))
            grads_a = replies[-1].value if replies[-1].error is None else ()
            if replies[-1].error is None and grad_wrt_b:
                replies.append(self.backward(grad_wrt_b, upstream))
        error = next((r.error for r in replies if r.error is not None), None)
        grads_b = replies[4].value if len(replies) > 4 and error is None else ()
        changed = any(b is not None and not torch.equal(_bits(k), _bits(b)) for k, b in zip(_tensors(kept), before))
        value = (replies[1].value, output_of(out_a), grads_a, replies[2].value, grads_b, changed)
        return Reply(value, error, sum(r.kernel_s for r in replies), sum(r.compile_s for r in replies))


    def grad_mode(self, args: tuple, mode: str) -> Reply:
        """A forward on copies of ``args`` in another autograd mode than the case's own call:
        ``"autograd"``, autograd enabled and every float input requiring grad (a training forward);
        ``"inference"``, under torch.inference_mode. Value: the output, without its graph."""
        if mode not in GRAD_MODES:
            raise ValueError(f"grad_mode: mode={mode!r}; one of {', '.join(GRAD_MODES)}")
        device = _device(args)
        floats = tuple(i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point())

        def call():
            poison_allocator(device, _nbytes(args))
            if mode == "autograd":
                leaves = _copies(args, floats)
                with torch.enable_grad():
                    return output_of(self.fn(*leaves))
            copies = _copies(args, ())
            with torch.inference_mode():
                out = output_of(self.fn(*copies))
            # outside inference mode, a clone is an ordinary tensor (an inference tensor cannot be handed over)
            return tuple(o.clone() for o in out) if isinstance(out, tuple) else (
                out.clone() if isinstance(out, torch.Tensor) else out)

        return self._timed(call, device)

    def changed_input(self, args: tuple, values: tuple, grad_wrt: tuple[int, ...],
                      upstream: torch.Tensor | None) -> Reply:
        """Call C: a forward on copies of ``args``; the copies then changed in place to ``values`` (a
        caller's in-place update of an activation or a weight between forward and backward); C's
        backward. Value: C's gradients, or a :class:`Refusal` where the backward raised because of
        that in-place step.

        torch refuses such a backward in several forms (the version counter of a tensor kept with
        ctx.save_for_backward; "a view was created in no_grad mode and its base ... has been modified
        inplace" for a view saved in an autograd.Function's forward; others to come), so the
        refusal is told by what caused it, not by its message: a control call D writes the copies'
        own values back in place (the same version bump, no change of value) before its backward.
        If D's backward raises too, the in-place write itself is refused: the kernel is safe. If D's
        backward succeeds, the kernel raised on the changed values: that is the kernel's error."""
        device = _device(args)
        first = self._changed_call(args, values, grad_wrt, upstream, device)
        if first.value is not _RAISED or first.error.oob is not None:
            return first
        control = self._changed_call(args, None, grad_wrt, upstream, device)
        kernel_s, compile_s = first.kernel_s + control.kernel_s, first.compile_s + control.compile_s
        if control.value is _RAISED and control.error.oob is None:  # refused for the in-place write itself: torch's refusal
            return Reply(Refusal(first.error.describe()), None, kernel_s, compile_s)
        return Reply(None, first.error, kernel_s, compile_s)

    def _changed_call(self, args: tuple, values: tuple | None, grad_wrt: tuple[int, ...],
                      upstream: torch.Tensor | None, device) -> Reply:
        """A forward on copies of ``args``, an in-place write of ``values`` into them (None: the
        copies' own values, which only bumps their version counters), the backward. A backward
        that raised comes back as ``value = _RAISED`` with its error; a forward that raised as is."""
        leaves = _copies(args, grad_wrt)
        fwd = self._timed(lambda: self.fn(*leaves), device)
        if fwd.error is not None:
            return fwd
        out = fwd.value
        with torch.no_grad():
            for a, v in zip(leaves, values if values is not None else [a.clone() if isinstance(a, torch.Tensor)
                                                                       else a for a in leaves]):
                if isinstance(a, torch.Tensor):
                    a.copy_(v)
        bwd = self._timed(lambda: _gradients(out, leaves, grad_wrt, upstream, self.grad), device)
        value = _RAISED if bwd.error is not None else bwd.value
        return Reply(value, bwd.error, fwd.kernel_s + bwd.kernel_s, fwd.compile_s + bwd.compile_s)


_RAISED = object()  # a backward that raised (harness-internal: never leaves this process)


def _copies(args: tuple, grad_wrt: tuple[int, ...]) -> list:
    """Copies of ``args`` (same strides), those at ``grad_wrt`` leaves that want a gradient."""
    copies = [torch.empty_strided(a.size(), a.stride(), dtype=a.dtype, device=a.device).copy_(a)
              if isinstance(a, torch.Tensor) else a for a in args]
    return [a.requires_grad_(True) if i in grad_wrt else a for i, a in enumerate(copies)]


def _gradients(out: Any, leaves, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None,
               grad: Callable = torch.autograd.grad) -> tuple:
    """The gradients of ``out`` for the leaves at ``grad_wrt`` (None where unused), graphs dropped.
    Several outputs (a tuple, ``upstream`` one per output): the outputs that require grad, each
    with its own upstream gradient (one that does not contributes nothing, as in torch)."""
    if isinstance(out, tuple) and isinstance(upstream, tuple):
        used = [(o, u) for o, u in zip(out, upstream) if isinstance(o, torch.Tensor) and o.requires_grad]
        out, upstream = [o for o, _ in used], [u for _, u in used]
        if not out:
            raise TypeError("no output requires grad: the kernel is not differentiable through autograd")
    elif not isinstance(out, torch.Tensor) or not out.requires_grad:
        raise TypeError("the output does not require grad: the kernel is not differentiable through autograd")
    grads = grad(out, [leaves[i] for i in grad_wrt], grad_outputs=upstream, allow_unused=True)
    return tuple(output_of(g) if g is not None else None for g in grads)


def _tensors(value: Any) -> tuple:
    """An output's tensors: itself, or each of a tuple (several outputs)."""
    return tuple(value) if isinstance(value, tuple) else (value,)


def _aliases(t: torch.Tensor, args) -> bool:
    """Whether ``t`` lies in the storage of one of ``args``."""
    ptr = t.untyped_storage().data_ptr()
    return any(isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == ptr for a in args)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes as integers: NaN equals NaN, -0.0 differs from 0.0."""
    t = t.detach().contiguous()
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32 if t.element_size() == 4 else torch.int64) \
        if t.is_floating_point() else t


def _device(args) -> torch.device:
    return next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))


def _nbytes(args) -> int:
    return sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))


class InProcessHost:
    """Calls the kernel in this process. ``isolated`` is False: the caller trusts the kernel."""

    isolated = False

    def __init__(self, fn: Callable):
        self.session = Session(fn)

    def contract_call(self, args: tuple) -> Reply:
        return self.session.contract_call(args)

    def forward(self, args: tuple, grad_wrt: tuple[int, ...]) -> Reply:
        return self.session.forward(args, grad_wrt)

    def backward(self, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None) -> Reply:
        return self.session.backward(grad_wrt, upstream)

    def repeat(self, args: tuple, grad_wrt: tuple[int, ...], upstream: torch.Tensor | None) -> Reply:
        return self.session.repeat(args, grad_wrt, upstream)

    def refill(self, values: tuple, grad_wrt: tuple[int, ...], grad_wrt_b: tuple[int, ...],
               upstream: torch.Tensor | None, earlier_upstream: torch.Tensor | None) -> Reply:
        return self.session.refill(values, grad_wrt, grad_wrt_b, upstream, earlier_upstream)

    def changed_input(self, args: tuple, values: tuple, grad_wrt: tuple[int, ...],
                      upstream: torch.Tensor | None) -> Reply:
        return self.session.changed_input(args, values, grad_wrt, upstream)

    def grad_mode(self, args: tuple, mode: str) -> Reply:
        return self.session.grad_mode(args, mode)

    def release(self) -> None:
        self.session.release()
