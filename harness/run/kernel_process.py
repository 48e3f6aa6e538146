"""The kernel process: user code runs here, never in the process that judges it.

:class:`KernelProcess` (judge side) starts a process with ``torch.multiprocessing``'s
*spawn* context (a fresh interpreter: a forked child would inherit the judge's memory and
open files), which loads the registry (plugins, extra modules such as generated mutants),
installs the interpreter's out-of-bounds guard and the compile clock, and serves the
requests of harness.run.kernel_host's interface over a pipe. Tensors travel through
torch.multiprocessing's reductions (CPU tensors in shared memory, CUDA tensors by IPC): the
kernel works on the judge's own input tensors (layouts and padding included, and the judge
sees any write to them); outputs are copied by the judge as soon as they arrive.

The judge reads replies with a restricted unpickler (:class:`_Unpickler`): a kernel that
writes its own bytes into the pipe can build tensors and plain data, never call anything
else in the judge. A reply that does not come within the watchdog's limit, or a process
that ends during a call, raises harness.run.kernel_host.KernelLost; the next call starts a
fresh process, up to ``Settings.kernel_restarts`` per job.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import sys
import types
import time
from multiprocessing.connection import wait
from typing import Any

from harness.exits import describe_exit
from vocabulary import Check

from harness.run.socket_dir import fit_socket_dir
from harness.run.kernel_reply import KernelError, KernelLost, NotATensor, Refusal, Reply
from vocabulary import KernelEnd
from harness.settings import Settings

_ALLOWED = {
    "torch.multiprocessing.reductions": {
        "rebuild_tensor", "rebuild_typed_storage", "rebuild_storage_fd", "rebuild_storage_filename",
        "rebuild_cuda_tensor", "rebuild_storage_empty", "rebuild_typed_storage_child",
    },
    "torch.storage": {"UntypedStorage", "TypedStorage"},
    "torch": {"Tensor", "Size", "device"},
    "multiprocessing.resource_sharer": {"DupFd"},
}


class _Unpickler(pickle.Unpickler):
    """Unpickles tensors, torch dtypes and plain data; any other global is refused."""

    def find_class(self, module: str, name: str):
        import torch

        if name in _ALLOWED.get(module, ()):
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"the kernel process sent a forbidden object: {module}.{name}")


@contextlib.contextmanager
def _bare_main():
    """Spawn re-imports the parent's ``__main__`` in the child unless it has neither a spec nor
    a file: the kernel process needs nothing of the judge's (or a test's) main module."""
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


@contextlib.contextmanager
def _environment_aside():
    """The harness's variables out of the environment the kernel process starts with (what its
    /proc/self/environ shows the code it runs, whatever os.environ says later); handed to it
    through its arguments instead (harness.run.neutral)."""
    from harness.run import neutral

    removed = neutral.scrub_environment()
    try:
        yield removed
    finally:
        os.environ.update(removed)


class KernelProcess:
    """The judge's handle on the kernel process of one set of plugins and modules.

    ``bind(op, name)`` tells it which entry the next calls are for and returns the entry's
    description (contract, origin, ...), read in the kernel process: the judge never imports
    user code. ``lost`` counts the processes lost in the current job (``begin_job`` resets it);
    ``ended`` is how the job's kernel process ended: None or a ``KernelEnd``;
    ``incompetent`` is why the bound entry cannot compile, if a reply of the job said so (a
    mutant that Triton refuses: harness.mutation.mutagen)."""

    def __init__(self, *, plugins: tuple[str, ...], extra_modules: tuple[str, ...], backend: str, settings: Settings,
                 library: tuple[tuple[str, ...], str] = ((), "*")):
        self.plugins, self.extra_modules, self.backend, self.settings = plugins, extra_modules, backend, settings
        self.library = library  # (modules, carrier glob): the library mutants to register (harness.mutation.library)
        self.proc = None
        self.conn = None
        self.starting = False  # started ahead (start_ahead), its ready not yet read
        self.bound: tuple[str, str] | None = None
        self.slowest = 0.0
        self.lost = 0
        self.ended: KernelEnd | None = None
        self.incompetent: str | None = None

    # --- life cycle --------------------------------------------------------------------
    def start_ahead(self) -> None:
        """Start the process now, before this one imports torch: its own start-up (torch, Triton,
        the plugins) runs beside the judge's; the first request waits for it to be ready. Not once
        the job has lost it too often (the next request says so)."""
        if self.proc is None and self.lost <= self.settings.kernel_restarts:
            self._spawn()

    def _spawn(self) -> None:
        # the standard library's spawn context (torch.multiprocessing's is the same one): the
        # process starts before torch is imported here; torch's reductions, which carry tensors
        # over the pipe, are installed once it is (_await_ready)
        import multiprocessing

        from harness.run import kernel_server

        fit_socket_dir()
        ctx = multiprocessing.get_context("spawn")
        mine, theirs = ctx.Pipe()
        with _bare_main(), _environment_aside() as environ:
            self.proc = ctx.Process(target=kernel_server.serve, daemon=True,  # no name: the code it runs must not
                                    args=(theirs, self.plugins, self.extra_modules, self.library, environ))  # see one
            self.proc.start()
        theirs.close()
        self.conn = mine
        self.starting = True

    def _start(self) -> None:
        if self.proc is None:
            self._spawn()
        self._await_ready()

    def _await_ready(self) -> None:
        import torch.multiprocessing  # noqa: F401  (tensors cross the pipe through its reductions)

        self.starting = False
        ready = self._receive("start-up", self.settings.startup_s, fatal=True)
        if ready.get("error"):
            self.kill()
            raise KernelLost(Check.CRASH, f"the kernel process could not start: {ready['error']}", fatal=True)
        if self.bound is not None:
            self._bind_remote(*self.bound)

    def kill(self) -> None:
        if self.proc is not None:
            if self.proc.is_alive():
                self.proc.kill()
            self.proc.join(timeout=10)
        if self.conn is not None:
            self.conn.close()
        self.proc = self.conn = None
        self.starting = False

    def close(self) -> None:
        if self.proc is not None and self.proc.is_alive():
            try:
                self.conn.send(("exit",))
            except OSError:
                pass
            self.proc.join(timeout=5)
        self.kill()

    def begin_job(self, *, fresh: bool = False) -> None:
        """Reset the job's counters; ``fresh``: the job's entry gets a kernel process of its own
        (one that changes the library it runs through must not meet code compiled before it)."""
        self.lost, self.ended, self.slowest, self.incompetent = 0, None, 0.0, None
        if fresh:
            self.close()

    # --- requests --------------------------------------------------------------------
    def bind(self, op: str, name: str) -> dict:
        self.bound = (op, name)
        if self.proc is None or self.starting:
            self._ensure()
            return self.entry
        return self._bind_remote(op, name)

    def _bind_remote(self, op: str, name: str) -> dict:
        answer = self._request(("bind", op, name), "start-up", self.settings.startup_s, fatal=True)
        if answer.get("error"):
            raise KernelLost(Check.CRASH, answer["error"], fatal=True)
        self.entry = answer["entry"]
        return self.entry

    def _ensure(self) -> None:
        if self.starting:
            self._start()
        if self.proc is not None:
            return
        if self.lost > self.settings.kernel_restarts:
            raise KernelLost(Check.CRASH, f"the kernel process was lost {self.lost} times in this job: "
                                      "the remaining cases are not run", fatal=True)
        self._start()

    def call(self, kind: str, *payload) -> Reply:
        """One kernel call; the watchdog's limit scales with the slowest call so far."""
        started = time.monotonic()
        self._ensure()
        startup = time.monotonic() - started
        limit = max(self.settings.watchdog_base(self.backend), self.settings.watchdog_factor * self.slowest)
        started = time.monotonic()
        answer = self._request((kind, *payload), kind, limit)
        self.slowest = max(self.slowest, time.monotonic() - started)
        if isinstance(answer.get("incompetent"), str):
            self.incompetent = self.incompetent or answer["incompetent"]
        try:
            reply = _reply(answer)
        except Exception as exc:  # not the shape the kernel server sends: the judge will not guess
            self._lose(Check.CRASH, f"the kernel process sent a malformed reply during {kind}: {type(exc).__name__}: {exc}",
                       fatal=True)
        reply.startup_s = startup
        return reply

    def rule(self, args: tuple) -> str | None:
        """The bound entry's Contract(rule=...) evaluated where the rule lives: this process's
        kernel process (the judge never imports a kernel's code): why they are outside, or None."""
        from harness.errors import RegistryError

        self._ensure()
        answer = self._request(("rule", args), "the contract's rule", self.settings.watchdog_base(self.backend), fatal=True)
        if answer.get("error"):
            raise RegistryError(answer["error"])
        return answer.get("why")

    def health(self) -> str | None:
        if self.proc is None:
            return None
        self._ensure()
        answer = self._request(("health",), "the health check", self.settings.watchdog_base(self.backend))
        return answer.get("problem")

    def release(self) -> None:
        """Ask the kernel process to drop the last case's tensors and return its cached GPU
        memory (harness.run.kernel_host.Session.release); nothing to do when it is not running
        (a process that died in the case has given its memory back, and its loss is counted once)."""
        if self.proc is None or not self.proc.is_alive():
            return
        self._ensure()
        self._request(("release",), "the memory release", self.settings.watchdog_base(self.backend))

    def _request(self, message: tuple, what: str, limit: float, *, fatal: bool = False) -> dict:
        try:
            self.conn.send(message)
        except OSError as exc:
            if self.proc.is_alive():  # the request never left the judge: no kernel to blame for the silence
                self._lose(Check.CRASH, f"the judge could not hand the {what} request to the kernel process: "
                                        f"{type(exc).__name__}: {exc} (a limit of this machine, not the kernel's doing)",
                           fatal=True)
            # else the process is gone: _receive says how it ended
        return self._receive(what, limit, fatal=fatal)

    def _receive(self, what: str, limit: float, *, fatal: bool = False) -> dict:
        ready = wait([self.conn, self.proc.sentinel], timeout=limit)
        if self.conn in ready:
            try:
                return _Unpickler(io.BytesIO(self.conn.recv_bytes())).load()
            except (EOFError, OSError):
                pass  # the process died while (or instead of) answering
            except Exception as exc:  # a reply the judge will not read is a lost process, not a verdict
                self._lose(Check.CRASH, f"the kernel process sent an unreadable reply during {what}: {exc}", fatal=True)
        if not ready:
            self._lose(Check.TIMEOUT, f"no reply from the kernel after {limit:.0f} s during {what}: the kernel process "
                                  "was killed (hang?)", fatal=True)
        self.proc.join(timeout=5)
        hint = " (the kernel called sys.exit/os._exit?)" if self.proc.exitcode == 0 else ""
        self._lose(Check.CRASH, f"the kernel process {describe_exit(self.proc.exitcode)} during {what}{hint}", fatal=fatal)

    def _lose(self, check: Check, message: str, *, fatal: bool):
        self.kill()
        self.lost += 1
        self.ended = KernelEnd.TIMEOUT if check is Check.TIMEOUT else (self.ended or KernelEnd.CRASHED)
        fatal = fatal or self.lost > self.settings.kernel_restarts
        raise KernelLost(check, message, fatal=fatal)


def _reply(answer: dict) -> Reply:
    error = answer.get("error")
    return Reply(
        value=_own(answer.get("value")),
        error=KernelError(**error) if error else None,
        kernel_s=float(answer.get("kernel_s", 0.0)),
        compile_s=float(answer.get("compile_s", 0.0)),
        launches=int(answer.get("launches", 0)),
        specializations=tuple(str(k)[:2000] for k in (answer.get("specializations") or ())[:10000]),
    )


def _own(value: Any) -> Any:
    """The judge's private copy of what the kernel sent: tensors cloned out of shared memory
    (the kernel process keeps a handle on it), descriptions of non-tensors rebuilt."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, dict) and value.get("not_a_tensor"):
        return NotATensor(str(value.get("type_name")), str(value.get("text")))
    if isinstance(value, dict) and value.get("refusal"):
        return Refusal(str(value.get("message")))
    if isinstance(value, (tuple, list)):
        return tuple(_own(v) for v in value)
    return None if not isinstance(value, (int, float, str)) else value


class ProcessHost:
    """harness.run.kernel_host's interface on a KernelProcess bound to one entry."""

    isolated = True

    def __init__(self, process: KernelProcess):
        self.process = process

    def contract_call(self, args: tuple) -> Reply:
        return self.process.call("contract_call", args)

    def forward(self, args: tuple, grad_wrt: tuple[int, ...]) -> Reply:
        return self.process.call("forward", args, grad_wrt)

    def backward(self, grad_wrt: tuple[int, ...], upstream) -> Reply:
        return self.process.call("backward", grad_wrt, upstream)

    def repeat(self, args: tuple, grad_wrt: tuple[int, ...], upstream) -> Reply:
        return self.process.call("repeat", args, grad_wrt, upstream)

    def refill(self, values: tuple, grad_wrt: tuple[int, ...], grad_wrt_b: tuple[int, ...], upstream,
               earlier_upstream) -> Reply:
        return self.process.call("refill", values, grad_wrt, grad_wrt_b, upstream, earlier_upstream)

    def changed_input(self, args: tuple, values: tuple, grad_wrt: tuple[int, ...], upstream) -> Reply:
        return self.process.call("changed_input", args, values, grad_wrt, upstream)

    def grad_mode(self, args: tuple, mode: str) -> Reply:
        return self.process.call("grad_mode", args, mode)

    def release(self) -> None:
        self.process.release()


