"""What the plugins register, learnt without importing them: ``python -m harness.registry.catalog``.

The process that decides a run (``verify``: the records' verdicts, verify.json, the exit status)
imports no user code, so no plugin, KernelBench problem or candidate can patch it. What it needs
of that code (the kernels and their ops, each kernel's contract, file and line, the closures of
the incremental store's key, each op's value checks) comes from a short-lived child that loads
the plugins, answers one JSON request on stdin with one JSON reply, and exits. The reply is
checked field by field (``_checked``) and becomes the parent's registry: each kernel as the
judge sees it (``harness.execution.worker.entry_view``: no function), each op the parent cannot
load itself (a plugin's) as a ``DescribedOp``. User code still runs, only elsewhere: in this
child, in the judges that need a plugin's op declaration, and in the kernel processes.

The child's standard output is the reply alone: whatever the plugins print goes to stderr. A
reply to a project-only request is kept in ``build/catalog/`` and stands for the next one while no
source it was read from has changed (``_replied``): an unchanged gate starts no child.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from harness.errors import HarnessError, PluginError, RegistryError, UsageError
from harness.settings import PROJECT_ROOT
from vocabulary import EntryKind

# the errors the child may report, re-raised in the parent as the same class (one line, exit 2)
_ERRORS = {cls.__name__: cls for cls in (UsageError, PluginError, RegistryError)}
_CACHE: dict[str, dict] = {}
_REPLIES = PROJECT_ROOT / "build" / "catalog"
_STARTED: dict[str, subprocess.Popen] = {}  # children started ahead (start), by request, not yet answered
_NOT_READ = ("tests", "build", "third_party", "node_modules")  # folders the child never imports from
KERNELBENCH: dict[str, dict] = {}  # a --reference problem's sizing by path, as the child declared it


@dataclasses.dataclass(frozen=True)
class DescribedOp:
    """An op a plugin declares, as the deciding process knows it: its name, its value checks
    (each must be compared once for a verdict) and its declaration's closure (the store's key).
    Its cases are the judge's business; a ``--case`` of it was validated by the child."""

    name: str
    checks: tuple[str, ...]
    closure: dict

    def value_checks(self) -> tuple[str, ...]:
        return self.checks

    def validate_case(self, case) -> None:
        """Checked by the catalog child against the real declaration (``describe``'s ``case``)."""


def _request(plugins: list[str], op: str | None, select: str, case: str | None) -> tuple[dict, str]:
    request = {"plugins": list(plugins), "op": op, "select": select, "case": case}
    return request, json.dumps(request, sort_keys=True)


def start(plugins: list[str], *, op: str | None = None, select: str = "*", case: str | None = None) -> None:
    """Start the catalog child of ``load``'s request now, before this process imports torch: the
    child's start-up (its own torch import, the plugins) runs beside this process's. Only once the
    backend is chosen (the child inherits it through the environment). Nothing starts where a
    saved reply answers the request (``_replied``)."""
    request, key = _request(plugins, op, select, case)
    if key not in _CACHE and key not in _STARTED and _saved(request) is None:
        if not _STARTED:
            atexit.register(_discard)
        _STARTED[key] = _spawn(request)


def load(plugins: list[str], *, op: str | None = None, select: str = "*", case: str | None = None) -> None:
    """Fill this process's registry from a catalog child: every kernel of the project and of
    ``plugins``, each op they implement; the child's usage errors are raised here as they were
    raised there. Once per set of arguments and process."""
    from harness.execution.worker import entry_view
    from harness.incremental.plan import DESCRIBED, FILES
    from harness.registry.registry import REGISTRY, load_builtin_ops

    request, key = _request(plugins, op, select, case)
    if key not in _CACHE:
        _CACHE[key] = _checked(_replied(request, _STARTED.pop(key, None)))
    reply = _CACHE[key]
    load_builtin_ops()  # the project's op specs: harness code, never a plugin's
    for name, data in reply["ops"].items():
        if name not in REGISTRY.ops:
            REGISTRY.add_op(DescribedOp(name, tuple(data["value_checks"]), data["closure"]))
    for data in reply["kernels"]:
        REGISTRY.add_described(entry_view(data["op"], data["name"], data))
    DESCRIBED.update({(k["op"], k["name"]): {"kernel": k["key"], "op": reply["ops"][k["op"]]["closure"]}
                      for k in reply["kernels"] if k.get("key") is not None})
    FILES.update(reply["files"])
    KERNELBENCH.update(reply.get("kernelbench") or {})


def _saved_path(request: dict) -> Path | None:
    key = _reply_key(request)  # read anew each time: a source may change between two requests
    return _REPLIES / f"catalog-{key}.json" if key else None


def _saved(request: dict) -> dict | None:
    """The saved reply to a project-only ``request`` whose sources are unchanged, or None."""
    path = _saved_path(request)
    if path is None:
        return None
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) else None


def _replied(request: dict, started: subprocess.Popen | None = None) -> dict:
    """The child's reply to ``request``; a request that names no plugin, problem or candidate (the
    project's own kernels: the gate) is answered from ``build/catalog/`` while none of the sources a
    child would read has changed (``_reply_key``), and the child is asked otherwise. The reply was a
    child's, never this process's reading of the kernels; it is checked like a fresh one."""
    saved = _saved(request)
    if saved is not None:
        if started is not None:  # started before the saved reply was known to answer: not needed
            started.kill()
            started.communicate()
        return saved
    path = _saved_path(request)
    reply = _ask(request, started)
    if path is not None and isinstance(reply, dict) and "error" not in reply:
        from reports import manifest, writer

        try:  # atomic and listed in the folder's manifest, like every file the harness writes
            writer.write_text(_REPLIES, path.name, json.dumps(reply, default=str))
        except (OSError, manifest.ForeignFileError):
            pass  # a read-only checkout: ask every time
    return reply


def _reply_key(request: dict) -> str | None:
    """What a project-only reply depends on, as a digest: the request, every Python source of the
    project outside tests/ (the kernels, their op specs and oracles, the harness that describes
    them), the interpreter, the installed distributions and the environment the child inherits
    (the backend, HARNESS_* and TRITON_* settings a kernel module reads at import). None for a
    request with plugin files (user code outside the project: asked every time)."""
    import hashlib

    if request.get("plugins"):
        return None
    h = hashlib.sha256(json.dumps(request, sort_keys=True).encode())
    h.update(f"{sys.executable}\0{sys.version}".encode())
    for entry in sys.path:  # the installed distributions by their metadata folders' names (name-version)
        try:
            listed = sorted(n for n in os.listdir(entry or ".") if n.endswith((".dist-info", ".egg-info", ".pth")))
        except OSError:
            continue
        h.update(f"{entry}\0{listed}".encode())
    from reports.manifest import GROUP_ENV

    for name in sorted(os.environ):  # each run's own group name is no setting
        if name.startswith(("HARNESS_", "TRITON_", "CUDA_", "TORCH_", "PYTORCH_")) and name != GROUP_ENV or name == "PYTHONPATH":
            h.update(f"{name}={os.environ[name]}\0".encode())
    for path in _package_sources(PROJECT_ROOT):
        h.update(str(path.relative_to(PROJECT_ROOT)).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:24]


def _package_sources(root: Path) -> list[Path]:
    """The .py files of the project's packages (folders with an ``__init__.py``, and the packages
    in them), tests/ aside: what the child can import from the project. A report folder's
    thousands of store files are never listed."""
    found = []
    for top in sorted(root.iterdir()):
        if top.name.startswith(".") or top.name in _NOT_READ or not (top / "__init__.py").is_file():
            continue
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if (Path(folder) / d / "__init__.py").is_file())
            found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return found


def _spawn(request: dict) -> subprocess.Popen:
    try:  # started as the judges are (harness.execution.workers): the backend is in the environment
        child = subprocess.Popen([sys.executable, "-m", "harness.registry.catalog"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=PROJECT_ROOT)
    except OSError as exc:
        raise HarnessError(f"the catalog process could not start: {exc}") from None
    # the request goes in at once (a pipe holds far more than it) and stdin closes: the child reads it
    # while this process goes on
    try:
        child.stdin.write(json.dumps(request))
        child.stdin.close()
    except OSError:  # it ended already: its exit status says how (_ask)
        pass
    child.stdin = None  # closed: communicate() has nothing more to send
    return child


def _discard() -> None:
    """Children started ahead whose reply no one asked for (the run ended before: a usage error)."""
    while _STARTED:
        _, child = _STARTED.popitem()
        child.kill()
        child.communicate()


def _ask(request: dict, child: subprocess.Popen | None = None) -> dict:
    child = child or _spawn(request)
    stdout, stderr = child.communicate()
    sys.stderr.write(stderr)  # the plugins' own output, and any traceback of the child
    try:
        reply = json.loads(stdout.strip().splitlines()[-1]) if stdout.strip() else None
    except ValueError:
        reply = None
    if child.returncode != 0 or not isinstance(reply, dict):  # user code ended it (os._exit at import): no verdict
        from harness.exits import describe_exit
        from harness.launcher import NO_VERDICT

        print(f"error: loading {', '.join(request['plugins']) or 'the project kernels'} ended before giving a verdict "
              f"(it {describe_exit(child.returncode)}): the catalog process described no kernel; no verdict "
              f"(exit {NO_VERDICT})", file=sys.stderr)
        raise SystemExit(NO_VERDICT)
    return reply


def _checked(reply: dict) -> dict:
    """The child's reply, every field of the expected type; an error it reported, raised."""
    error = reply.get("error")
    if error is not None:
        cls = _ERRORS.get(error.get("type")) if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else None
        if cls is None or not isinstance(message, str):
            raise UsageError(f"the catalog process reported a malformed error: {str(error)[:200]}")
        raise cls(message)
    files = reply.get("files")
    _need(isinstance(files, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()),
          "the modules' files")
    ops, kernels = reply.get("ops"), reply.get("kernels")
    if not isinstance(ops, dict) or not isinstance(kernels, list):
        raise UsageError("the catalog process's reply lacks its ops or kernels")
    for name, data in ops.items():
        _need(isinstance(name, str) and name and isinstance(data, dict), f"op {name!r}")
        _need(isinstance(data.get("value_checks"), list) and all(isinstance(c, str) and c for c in data["value_checks"])
              and data["value_checks"], f"op {name!r}'s value checks")
        _need(isinstance(data.get("closure"), dict), f"op {name!r}'s closure")
    for k in kernels:
        _need(isinstance(k, dict) and all(isinstance(k.get(f), str) and k.get(f) for f in ("op", "name", "kind", "origin",
              "defined_at")), f"kernel {str(k)[:80]}")
        _need(k["op"] in ops, f"kernel {k['name']!r}: its op {k['op']!r} is not described")
        _need(k["kind"] in tuple(EntryKind), f"kernel {k['name']!r}'s kind")
        _need(isinstance(k.get("contract"), dict) and isinstance(k.get("meta"), dict)
              and isinstance(k.get("description"), str) and (k.get("plugin") is None or isinstance(k["plugin"], str)),
              f"kernel {k['name']!r}'s contract")
        _need(k.get("key") is None or isinstance(k["key"], dict), f"kernel {k['name']!r}'s key")
    sizing = reply.get("kernelbench", {})
    _need(isinstance(sizing, dict) and all(isinstance(p, str) and isinstance(v, dict)
                                          and isinstance(v.get("sizes"), dict) and isinstance(v.get("scaling_text"), str)
                                          for p, v in sizing.items()), "the problems' sizing")
    return reply


def _need(ok: bool, what: str) -> None:
    if not ok:
        raise UsageError(f"the catalog process's reply is malformed: {what}")


def describe(request: dict) -> dict:
    """The child's answer: load the project's kernels and the plugins, then describe every kernel
    (and, for those ``op``/``select`` choose, the parts of its store key) and the ops they name."""
    from harness.cases.case import Case
    from harness.incremental import key as keys
    from harness.incremental.plan import kernel_part, op_closure
    from harness.registry import loader
    from harness.registry.registry import REGISTRY
    from harness.run.kernel_server import entry_data

    from harness import kernelbench

    kernelbench.DETECT_SHORTCUTS = False  # describing runs no candidate
    loader.load_all(plugins=request["plugins"])
    chosen = {(e.op, e.name) for e in REGISTRY.select(op=request["op"], kind=EntryKind.KERNEL, pattern=request["select"])}
    kernels = [dict(entry_data(e), op=e.op, name=e.name, key=kernel_part(e) if (e.op, e.name) in chosen else None)
               for e in REGISTRY.select(kind=EntryKind.KERNEL)]
    names = {e.op for e in REGISTRY.select(kind=EntryKind.KERNEL)} | ({request["op"]} if request["op"] else set())
    if request["case"]:
        case = Case.parse(request["case"])
        REGISTRY.op(case.op).validate_case(case)  # a malformed case is bad usage (exit 2), not a kernel failure
        names.add(case.op)
    chosen_ops = {op for op, _ in chosen} | ({request["op"]} if request["op"] else set())
    ops = {}
    for name in sorted(names):
        spec = REGISTRY.op(name)  # an unknown op: a RegistryError naming the known ones
        ops[name] = {"value_checks": list(spec.value_checks()),
                     "closure": op_closure(spec) if name in chosen_ops else {}}
    modules = {m for k in kernels if k["key"] for m in k["key"]["closure"]} | {m for o in ops.values() for m in o["closure"]}
    files = {m: str(path) for m in sorted(modules) if (path := keys._file_of(m)) is not None}
    kb = sys.modules.get("harness.kernelbench")  # a --reference problem, sized where it was declared
    sizing = {p: {"sizes": s.record(), "scaling_text": s.text()} for p, s in (kb.SCALING.items() if kb else ())}
    return {"ops": ops, "kernels": kernels, "files": files, "kernelbench": sizing}


def main() -> int:
    reply_to = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the plugins' prints go to stderr: stdout carries the reply alone
    request = json.loads(sys.stdin.read())
    try:
        reply = describe(request)
    except HarnessError as exc:
        name = type(exc).__name__ if type(exc).__name__ in _ERRORS else "UsageError"
        reply = {"error": {"type": name, "message": str(exc)}}
    reply_to.write(json.dumps(reply, default=str) + "\n")
    reply_to.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
