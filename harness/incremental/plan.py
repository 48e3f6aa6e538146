"""Which kernels' verdicts can be reused: each kernel's key, what the store holds under it, and,
for a miss, what changed since the kernel's last saved verdict (named on the console).

A kernel's key covers the closure of its module (its jit helpers, a plugin's local imports),
the closure of its op's declaration and oracle, the harness's source, the environment and the
run's settings. The store also keeps, per kernel, the parts of its latest saved key (the kind
``latest``) so that a rerun can say which file changed, not only that something did.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from harness.incremental import key as keys
from harness.incremental.store import Store
from harness.run.backend import DEVICE
from harness.settings import PROJECT_ROOT
from vocabulary import Backend, EntryKind

VERIFY = "verify"
LATEST = "latest"


@dataclasses.dataclass
class Plan:
    """One kernel's (or mutant's) key, its saved result (None: run it) and why it reruns."""

    key: str
    parts: dict
    saved: dict | None
    reason: str

    @property
    def reused(self) -> bool:
        return self.saved is not None

    def describe(self) -> str:
        if self.saved is not None:
            return f"reused (verdict of {self.saved['saved_at']})"
        return f"rerun: {self.reason}"

    def marker(self) -> dict:
        """What a report records about a reused result."""
        return {"saved_at": self.saved["saved_at"], "key": self.key}


def entry_closure(entry) -> dict:
    """The closure of the module that defines a kernel's function and, for a plugin's kernel, of
    the plugin file that registered it (which may take the function from another module, and
    holds its contract)."""
    parts = dict(keys.closure(entry.fn.__module__))
    if entry.plugin:
        from harness.registry.loader import module_name

        parts.update(keys.closure(module_name(entry.plugin)))
    return parts


def op_modules(spec) -> list[str]:
    """The modules that declare an op: its spec's class and, for a declared op, the modules of
    the declaration's functions (its reference oracle, its error terms)."""
    modules = {type(spec).__module__}
    decl = getattr(spec, "decl", None)
    if decl is not None:
        modules.update(getattr(v, "__module__", None) for v in vars(decl).values() if callable(v))
    return sorted(m for m in modules if m)


def op_closure(spec) -> dict:
    parts: dict[str, str] = {}
    for module in op_modules(spec):
        parts.update(keys.closure(module))
    return parts


# the modules that run a suite; their closure reaches what the engine imports outside harness/
# (the shared vocabulary, the project's op declarations it loads), which harness_source does not cover
ENGINE = ("harness.execution.worker", "harness.run.runner", "harness.run.suite", "harness.run.kernel_process")


def engine_closure() -> dict:
    parts: dict[str, str] = {}
    for module in ENGINE:
        parts.update(keys.closure(module))
    return parts


def kernel_part(entry) -> dict:
    """The kernel's part of its key: its name, module closure and contract."""
    return {"op": entry.op, "name": entry.name, "closure": entry_closure(entry), "contract": repr(entry.contract)}


# (op, kernel) -> {"kernel": ..., "op": ...}: the key parts of a kernel whose module this process
# never imports, as the catalog child computed them (harness.registry.catalog fills it)
DESCRIBED: dict[tuple[str, str], dict] = {}
FILES: dict[str, str] = {}  # module -> its file, for the modules of those parts (what a rerun names)


def kernel_parts(entry, spec, *, backend: str, device: str, settings: dict) -> dict:
    """A kernel's key parts; a described kernel's kernel and op parts are the catalog child's."""
    described = DESCRIBED.get((entry.op, entry.name))
    return {
        "engine": engine_closure(),
        "kernel": described["kernel"] if described else kernel_part(entry),
        "op": described["op"] if described else op_closure(spec),
        "harness": keys.harness_source(),
        "environment": keys.environment(backend, device),
        "settings": settings,
    }


def plan(store: Store, kind: str, ident: str, parts: dict) -> Plan:
    """Look ``parts`` up; ``ident`` names the kernel across keys (for the reason of a rerun)."""
    key = keys.digest(parts)
    saved = store.get(kind, key)
    if saved is not None:
        return Plan(key, parts, saved, "")
    if not (store.enabled and store.reuse):
        return Plan(key, parts, None, "--no-cache")
    latest = store.peek(LATEST, keys.digest({"kind": kind, "ident": ident}))
    reason = changes(latest["payload"]["parts"], parts) if latest else "no saved verdict"
    return Plan(key, parts, None, reason)


def remember(store: Store, kind: str, ident: str, plan_: Plan, payload: dict) -> None:
    """Save a complete result under its key, and its parts as the kernel's latest."""
    store.put(kind, plan_.key, payload, plan_.parts)
    store.put(LATEST, keys.digest({"kind": kind, "ident": ident}), {"parts": plan_.parts, "key": plan_.key}, {})


def changes(old: dict, new: dict) -> str:
    """What differs between two keys' parts, in words: the changed files first."""
    files = sorted(_changed_modules(old, new))
    if files:
        shown = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        return f"{shown} changed"
    for part in ("harness", "environment", "settings"):
        if old.get(part) != new.get(part):
            return {"harness": "the harness changed", "environment": "torch/triton/device changed",
                    "settings": "the settings changed"}[part]
    return "the key changed"


def _changed_modules(old: dict, new: dict) -> set[str]:
    names = set()
    for part in ("kernel", "op", "mutant", "engine"):
        a, b = old.get(part) or {}, new.get(part) or {}
        if part in ("kernel", "mutant"):
            a, b = a.get("closure", {}), b.get("closure", {})
        if not isinstance(a, dict) or not isinstance(b, dict):
            if a != b:
                names.add(f"the {part}")
            continue
        names.update(_display(m) for m in set(a) | set(b) if a.get(m) != b.get(m))
    return names


def _display(module: str) -> str:
    """A module's file relative to the project (kernels/rmsnorm.py), or its name."""
    path = keys._file_of(module) or (Path(FILES[module]) if module in FILES else None)
    if path is not None:
        return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)
    return module


def verify_plans(entries, store: Store, *, backend: str, settings: dict) -> list[Plan]:
    """Each selected kernel's plan for ``verify``."""
    from harness.registry.registry import REGISTRY

    device = DEVICE[Backend(backend)]
    return [unless_inconclusive(plan(store, VERIFY, f"{e.op}/{e.name}",
                                      kernel_parts(e, REGISTRY.op(e.op), backend=backend, device=device,
                                                   settings=settings)))
            for e in entries]


def unless_inconclusive(plan_: Plan) -> Plan:
    """A saved verdict with cases the judge could not run (out of GPU memory held by other
    processes, ...) is not reused: those cases were never the kernel's, and running again, with
    the device less busy, is what their records ask for. Reused, the kernel would stay "not
    verified" until one of its files changed."""
    if plan_.saved is None:
        return plan_
    records = plan_.saved.get("payload", {}).get("records") or []
    stuck = sorted({r.get("case_id", "?") for r in records if r.get("inconclusive")})
    if not stuck:
        return plan_
    return Plan(plan_.key, plan_.parts, None,
                f"{len(stuck)} case(s) the judge could not run last time (e.g. {stuck[0]}): run again")


def verified_cases(entry, store: Store, *, backend: str) -> tuple[frozenset[str], float, str] | None:
    """The cases a kernel's saved ``verify`` verdict passed (every check of the case), if that verdict
    is still current: saved under the key that the kernel, its op, the engine, the harness and the
    environment have now (whatever verify's settings were: a case id fixes its inputs, so a case
    passed under other settings passed). (case ids, verify's worker-seconds, when it was saved), or
    None. The mutation campaign's sanity step does not run these again (harness.mutation.campaign)."""
    from harness.registry.registry import REGISTRY

    if not (store.enabled and store.reuse):
        return None
    latest = store.peek(LATEST, keys.digest({"kind": VERIFY, "ident": f"{entry.op}/{entry.name}"}))
    if latest is None:
        return None
    saved_parts = latest["payload"]["parts"]
    device = DEVICE[Backend(backend)]
    parts = kernel_parts(entry, REGISTRY.op(entry.op), backend=backend, device=device,
                         settings=saved_parts.get("settings"))
    if keys.digest(parts) != latest["payload"]["key"]:
        return None
    saved = store.get(VERIFY, latest["payload"]["key"])
    if saved is None or saved["payload"].get("status") != "ok":
        return None
    verdicts: dict[str, bool] = {}
    for r in saved["payload"]["records"]:
        verdicts[r["case_id"]] = verdicts.get(r["case_id"], True) and bool(r["passed"]) and not r.get("inconclusive")
    passed = frozenset(c for c, ok in verdicts.items() if ok)
    seconds = float(saved["payload"].get("worker_seconds") or saved["payload"].get("seconds") or 0.0)
    return passed, seconds, saved["saved_at"]


TRAIN = "train"


def train_plan(entry, store: Store, *, backend: str, settings: dict) -> Plan:
    """train-check's plan: the kernel's module closure, the training workflow's closure (its
    model, data, reference path and conditions), the harness, the environment and the options."""
    device = DEVICE[Backend(backend)]
    parts = {
        "kernel": kernel_part(entry),
        "engine": dict(keys.closure("harness.workflows.training")),
        "harness": keys.harness_source(),
        "environment": keys.environment(backend, device),
        "settings": settings,
    }
    return plan(store, TRAIN, entry.name, parts)


MUTANT = "mutant"


def mutant_plans(entries, store: Store, *, backend: str, settings: dict) -> dict:
    """Each mutant's plan (by ``<op>/<name>``): its own fingerprint (the diff of a generated mutant, the
    module closure of a catalog or plugin one) with the closure of its op's project kernels,
    of the op's declaration and oracle, the harness, the environment and the settings."""
    from harness.registry.registry import Origin
    from harness.mutation.outcome import ident
    from harness.registry.registry import REGISTRY

    device = DEVICE[Backend(backend)]
    shared = {"engine": engine_closure(), "harness": keys.harness_source(),
              "environment": keys.environment(backend, device), "settings": settings}
    per_op: dict[str, tuple[dict, dict]] = {}  # op -> (its project kernels' closure, its own): the same for its mutants
    plans = {}
    for e in entries:
        if e.op not in per_op:
            originals = {}
            for k in REGISTRY.select(op=e.op, kind=EntryKind.KERNEL):
                if k.origin is Origin.PROJECT:
                    originals.update(entry_closure(k))
            per_op[e.op] = originals, op_closure(REGISTRY.op(e.op))
        originals, op = per_op[e.op]
        parts = {
            "mutant": {"name": e.name, "fingerprint": e.meta.get("fingerprint"), "diff": e.meta.get("diff"),
                       "schema": bool(e.meta.get("schema")),  # its saved specialization keys are a schema's
                       "closure": entry_closure(e), "contract": repr(e.contract)},
            "kernel": {"op": e.op, "name": e.name, "closure": originals},
            "op": op,
            **shared,
        }
        plans[ident(e)] = plan(store, MUTANT, ident(e), parts)
    return plans


SANITY = "sanity"


def sanity_plan(ops: list[str], store: Store, *, backend: str, settings: dict) -> Plan:
    """The sanity step of ``ops`` (their clean kernels pass, their forced failures fail): its key
    is the closure of the clean kernels, of the forced-failure mutants and of the ops' specs."""
    from harness.registry.registry import REGISTRY, Origin

    device = DEVICE[Backend(backend)]
    parts = {"kernel": {"ops": ops, "closure": {}}, "op": {}, "mutant": {"closure": {}}}
    for e in REGISTRY.select(kind=EntryKind.KERNEL):
        if e.origin is Origin.PROJECT and e.op in ops:
            parts["kernel"]["closure"].update(entry_closure(e))
    for e in REGISTRY.select(kind=EntryKind.MUTANT):
        if e.name.startswith("sanity.forced_failure.") and e.op in ops:
            parts["mutant"]["closure"].update(entry_closure(e))
    for op in ops:
        parts["op"].update(op_closure(REGISTRY.op(op)))
    parts.update(engine=engine_closure(), harness=keys.harness_source(), environment=keys.environment(backend, device), settings=settings)
    return plan(store, SANITY, ",".join(ops), parts)
