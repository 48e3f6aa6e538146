"""The kernel side of harness.run.kernel_process: the loop that runs in the kernel process.

It loads the user's code (plugins, extra modules), installs the out-of-bounds guard and the
compile clock, then answers the judge's requests one at a time: ``bind`` (which entry, and
its contract and description), ``contract_call``, ``forward``, ``backward``, ``repeat``, ``refill``,
``changed_input`` (harness.run.kernel_host.Session does the calls), ``health``, ``release`` (drop the last case's
tensors and return the cached GPU memory), ``exit``. Every kernel call
is wrapped in ``except BaseException``: ``sys.exit``, ``KeyboardInterrupt`` and the like
come back as the kernel's error; what cannot be caught (``os._exit``, a signal) ends the
process, and the judge sees how. The user's code runs where nothing names the harness
(harness.run.neutral): environment and argv scrubbed before it is imported, every kernel call
and backward on a neutral thread with the harness's modules out of ``sys.modules``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any

from harness.orphans import die_with_parent
from vocabulary import EntryKind


def health(device: str) -> str | None:
    """None if the device still computes correctly, else why not (a sticky CUDA error)."""
    if device != "cuda":
        return None
    try:
        import torch

        torch.cuda.synchronize()
        probe = torch.arange(4, device="cuda", dtype=torch.float32)
        if float((probe + 1).sum()) != 10.0:
            return "the device returned a wrong result for a probe computation"
        torch.cuda.empty_cache()
    except Exception as exc:  # a sticky CUDA error (illegal address, device assert) poisons the context
        return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return None


def entry_data(entry) -> dict:
    c = entry.contract
    return {
        "kind": entry.kind.value, "origin": str(entry.origin), "defined_at": entry.defined_at, "plugin": entry.plugin,
        "description": entry.description, "meta": {k: v for k, v in entry.meta.items() if isinstance(v, (str, int, float))},
        "contract": {
            "dtypes": [str(d).removeprefix("torch.") for d in c.dtypes] if c.dtypes is not None else None,
            "max_n": c.max_n, "deterministic": bool(c.deterministic),
            # True (every tensor input) or the names of the inputs that must be contiguous
            "contiguous": c.contiguous if isinstance(c.contiguous, bool) else [str(n) for n in c.contiguous],
            "unit_stride": [str(n) for n in c.unit_stride],
            "max_leading_dims": c.max_leading_dims, "self_limits": bool(c.self_limits),
            "waive": {str(k): str(v) for k, v in (c.waive or {}).items()},
            "precision": c.precision,
            "forward_only": bool(c.forward_only),
            "inplace": {str(k): str(v) for k, v in (c.inplace or {}).items()},
            # the rule is a function of this process: the judge asks for its answer ("rule" requests)
            "rule": c.rule_name() if c.rule is not None else None,
        },
    }


def _rule(entry, args: tuple) -> dict:
    """The bound entry's Contract(rule=...) on the judge's arguments: its answer, or why it broke."""
    from harness.errors import RegistryError

    try:
        return {"why": entry.contract.rule_reason(args)}
    except RegistryError as exc:
        return {"error": str(exc)}


def _plain(value: Any) -> Any:
    """Replies hold tensors and plain data only (the judge's unpickler refuses anything else)."""
    from harness.run.kernel_host import NotATensor, Refusal

    if isinstance(value, NotATensor):
        return {"not_a_tensor": True, "type_name": value.type_name, "text": value.text}
    if isinstance(value, Refusal):
        return {"refusal": True, "message": value.message}
    if isinstance(value, (tuple, list)):
        return tuple(_plain(v) for v in value)
    return value


def _answer(reply, fn) -> dict:
    """A call's reply; ``incompetent``: why the bound entry cannot compile, when a mutant's
    build or launch has shown it (harness.mutation.mutagen), so the judge can say so."""
    return {"value": _plain(reply.value), "error": dataclasses.asdict(reply.error) if reply.error else None,
            "kernel_s": reply.kernel_s, "compile_s": reply.compile_s, "launches": reply.launches,
            "specializations": list(reply.specializations),
            "incompetent": _text(getattr(fn, "incompetent", None))}


def _text(value: Any) -> str | None:
    return str(value)[:1000] if value else None


def _load(plugins, extra_modules, library) -> str:
    """Set up the process; '' or why it failed."""
    try:
        import torch.multiprocessing  # noqa: F401  (registers the tensor reductions used by replies)

        from harness.registry import loader
        from harness.run import backend, compile_clock, neutral, oob

        if backend.current().is_interpreter:
            oob.install()
            poison_fresh_memory()
        compile_clock.install()
        harness_env = neutral.scrub_environment()  # before any user code: it sees none of the harness
        neutral.scrub_argv()
        neutral.install()
        with _environment(harness_env):  # the harness's own modules (a base revision's autoload) read theirs
            loader.load_all(extra_modules=extra_modules)
        loader.load_all(plugins=plugins, library=library)
    except BaseException as exc:  # user code at import time: report it, the judge fails the job
        return f"{type(exc).__name__}: {exc}"
    return ""


@contextlib.contextmanager
def _environment(variables: dict[str, str]):
    os.environ.update(variables)
    try:
        yield
    finally:
        for name in variables:
            os.environ.pop(name, None)


def poison_fresh_memory() -> None:
    """On the CPU, every ``torch.empty`` of the kernel process comes back filled with NaN (integers:
    their largest value), as ``kernel_host.poison_allocator`` does for the GPU's caching allocator:
    an output element, partial sum or workspace a kernel never writes reads as NaN, not as whatever
    the freed memory held (often a lucky 0, which passed). torch does it in deterministic mode
    only; warn_only keeps an op that has no deterministic version running, as before."""
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True


def serve(conn, plugins: tuple[str, ...], extra_modules: tuple[str, ...],
          library: tuple[tuple[str, ...], str] = ((), "*"), environ: dict[str, str] | None = None) -> None:
    os.environ.update(environ or {})  # the harness's variables, kept out of the environment it was started with
    die_with_parent()  # no kernel process outlives its judge
    from harness.run.socket_dir import fit_socket_dir

    fit_socket_dir()  # replies carry tensors
    problem = _load(plugins, extra_modules, library)
    conn.send({"ready": not problem, "error": problem})
    if problem:
        return
    import torch

    from harness.registry.registry import REGISTRY
    from harness.run import backend, neutral
    from harness.run.kernel_host import Session

    device = backend.current().device
    session = entry = None
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the judge is gone
        kind, payload = request[0], request[1:]
        if kind == "exit":
            _release(entry)
            from harness.exits import end_now

            end_now(0)  # the judge asked: it need not wait for torch's and Triton's teardown
        if kind == "bind":
            _release(entry)
            try:
                entry = REGISTRY.get(*payload)
            except Exception as exc:  # an unknown name: the judge fails the job with this message
                entry = None
                conn.send({"error": str(exc)})
                continue
            # a kernel under test runs where nothing names the harness; a mutant is the harness's own
            # code (its first call may build it through the registry), called as before
            through = neutral.bind if entry.kind is EntryKind.KERNEL else _direct
            session = Session(through(entry.fn), catch=(BaseException,), grad=through(torch.autograd.grad))
            conn.send({"entry": entry_data(entry)})
        elif kind == "health":
            conn.send({"problem": health(device)})
        elif kind == "release":
            if session is not None:
                session.release()
            conn.send({"released": True})
        elif kind == "rule":
            conn.send(_rule(entry, *payload))
        else:
            _send(conn, _answer(getattr(session, kind)(*payload), entry.fn))


def _direct(fn):
    return fn


def _release(entry) -> None:
    """An entry that changed the process while bound (a library mutant swapped into the
    library's modules: harness.mutation.library) puts it back before the next entry runs."""
    release = getattr(entry.fn, "release", None) if entry is not None else None
    if callable(release):
        release()


def _send(conn, answer: dict) -> None:
    """Send a reply; an output that cannot be shared as it is (for instance a kernel that writes
    its gradients into the input tensors the judge handed over, which came through CUDA IPC and
    cannot be passed back) is sent as a fresh copy of the same values."""
    try:
        conn.send(answer)
        return
    except Exception as exc:
        first = exc
    try:
        conn.send(dict(answer, value=_copied(answer["value"])))
    except Exception:  # still not sendable: the kernel's failure, never the judge's guess
        conn.send({"value": None, "error": {"type_name": type(first).__name__, "text":
                   f"the kernel's output could not be handed to the judge: {type(first).__name__}: {first}",
                   "oob": None, "rejection": False, "limit": False}, "kernel_s": 0.0, "compile_s": 0.0})


def _copied(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, tuple):
        return tuple(_copied(v) for v in value)
    return value