"""KernelBench problems: ``verify --reference problem.py --candidate solution.py``.

A problem file defines ``Model(nn.Module)``, ``get_inputs()`` and ``get_init_inputs()``; a
candidate file defines ``ModelNew``, built with the same constructor arguments. ``declare``
makes the op with harness.ops.reference.from_reference: the reference is Model's forward in
float64, on weights made once from ``get_init_inputs()`` under a fixed seed and rounded to
values that fp32, fp16 and bf16 all hold exactly (so the kernel in any dtype holds the very
weights the reference uses), the inputs' dims found by trying the reference (``vary="auto"``:
a batch dim the model takes at any size varies, a dim the weights fix does not), the forward
only. The kernel is ModelNew with Model's weights copied in, cast to each case's dtype, declared
``Contract(forward_only=True)``: its verdict is "PASS (forward only)" (verify.json ``forward_only: true``).
ModelNew is called under torch.no_grad, as KernelBench calls it, except by the runner's ``grad_modes``
check (a forward with autograd enabled, one under torch.inference_mode); the cases include one per
varying dim at 4x the example's size (harness.ops.beyond). The process that calls the candidate runs
it once first to find a shortcut (harness.shortcut: it calls the reference Model or the problem's own
torch op), which verify.json records as the kernel's ``shortcut`` and ``verify --strict`` fails.

``use_in_verify`` turns the two options into a generated plugin file (``REPORT_DIR/kernelbench/``)
that every process of the run loads, so the run is any verify run: records, reports, repros.
Bad input (a missing file, no Model / ModelNew / get_inputs, a file that raises on import) is a
UsageError: one line, exit 2.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib.util
import os
import re
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.errors import UsageError
from harness.run import neutral

SEED = 0
_DECLARED: dict[tuple[str, str | None], Any] = {}
_PINNED: dict[str, dict] = {}
SCALING: dict[str, Any] = {}  # this process's problems' sizing (harness.reference.sizing.Scaling) by path
# run the candidate once to find a shortcut where it is registered: in the kernel processes, never in the
# catalog child (harness.registry.catalog), which only describes it (a candidate that ends its process
# when called ends a kernel process there: the case's crash, the kernel's failure)
DETECT_SHORTCUTS = True


class Tampered(Exception):
    """A pinned input file no longer holds what it held when the run started (no verdict: exit 3)."""


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def pin(paths: list[str], where: Path) -> dict[str, dict]:
    """Read and hash each file once, before any user code runs, and keep a copy under ``where``
    (named by its hash): every process of the run loads the problem from the copy, and the
    candidate from its own path (it may import files beside it), each after checking its hash, so
    a candidate that rewrites the problem file (or the copy) cannot change the oracle unseen; a
    file that changed by the end of the run ends it as tampered (harness.cli.verify, exit 3)."""
    where.mkdir(parents=True, exist_ok=True)
    pins = {}
    for path in paths:
        data = Path(path).read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        copy = where / f"{Path(path).stem}_{digest[:16]}.py"
        copy.write_bytes(data)
        pins[str(Path(path).resolve())] = {"copy": str(copy), "sha256": digest}
    _PINNED.update(pins)
    return pins


def pin_in_place(paths: list[str]) -> list[dict]:
    """Hash each plugin file once, before any user code runs (a plugin may import files beside it,
    so it is loaded where it lies): verify.json records the hashes, and a file that changed by the
    end of the run ends it as tampered, as a pinned problem does."""
    pins = []
    for path in paths:
        file = Path(path).resolve()
        if not file.is_file():
            continue  # the loader says so, in one line
        digest = sha256(file)
        _PINNED[str(file)] = {"copy": str(file), "sha256": digest}
        pins.append({"path": str(file), "sha256": digest})
    return pins


def tampered() -> list[str]:
    """The pinned files (originals and copies) whose content changed since the run started."""
    out = []
    for original, p in _PINNED.items():
        for path in dict.fromkeys((original, p["copy"])):
            try:
                same = sha256(path) == p["sha256"]
            except OSError:
                same = False
            if not same:
                out.append(path)
    return out


def op_name(problem: str) -> str:
    return "kb_" + re.sub(r"\W", "_", Path(problem).stem)


def kernel_name(candidate: str) -> str:
    stem = re.sub(r"\W", "_", Path(candidate).stem)
    return stem if stem.isidentifier() else f"candidate_{stem}"


def _import(path: str, option: str, pins: dict | None = None):
    """Import ``path`` (its pinned copy when ``pins`` has it, after checking the copy's hash)."""
    file = Path(path)
    pinned = (pins or {}).get(str(file.resolve()))
    if pinned is not None:  # the reference from its copy; a candidate where it lies (it may import its siblings)
        _PINNED.setdefault(str(file.resolve()), pinned)
        source = Path(pinned["copy"]) if option == "--reference" else file
        if not source.is_file() or sha256(source) != pinned["sha256"]:
            raise Tampered(f"{option} {path}: {source} changed during the run (sha256 was {pinned['sha256'][:16]}...): "
                           "no verdict")
        file = source
    if not file.is_file():
        raise UsageError(f"{option} {path}: file not found" if not file.exists() else f"{option} {path}: not a file")
    resolved = str(file.resolve())
    name = f"user_{file.stem}_{hashlib.sha1(resolved.encode()).hexdigest()[:8]}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        neutral.call(spec.loader.exec_module, module)  # in a kernel process: nothing in sight names the harness
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except BaseException as exc:  # user code: one line, never a traceback
        del sys.modules[name]
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == resolved]
        where = f" (line {frames[-1].lineno})" if frames else ""
        raise UsageError(f"{option} {path} failed to import{where}: {type(exc).__name__}: {_first_line(exc)}") from None
    return module


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _need(module, attr: str, option: str, path: str, what: str):
    value = getattr(module, attr, None)
    if value is None or not callable(value):
        raise UsageError(f"{option} {path} defines no {attr} ({what})")
    return value


def _call(what: str, fn, *args):
    try:
        return neutral.call(fn, *args)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        raise UsageError(f"{what} raised {type(exc).__name__}: {_first_line(exc)}") from None


def representable(module) -> None:
    """Round the float parameters and buffers of ``module``, in place, to values fp32, fp16 and
    bf16 all hold exactly (bf16's 8 significant bits, within fp16's range)."""
    import torch

    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if t.is_floating_point():
                v = t.detach().to(torch.float32).clamp(-60000.0, 60000.0)
                for _ in range(4):  # a fixed point in two or three rounds
                    v = v.to(torch.bfloat16).to(torch.float16).to(torch.float32)
                v = torch.where(v.abs() < 2.0 ** -14, torch.zeros_like(v), v)  # no fp16 subnormals (fewer bits)
                t.copy_(v.to(t.dtype))


def declare(problem: str, candidate: str | None = None, pins: dict | None = None, low_precision: bool = False, *,
            detect: bool = True, sizes: dict | None = None, real: bool = False):
    """The op of ``problem`` (registered) and, unless this process only reads op declarations
    (the judge: it never imports user code beyond them), ``candidate``'s ModelNew as its kernel.
    ``detect``: run the candidate once to find a shortcut (harness.shortcut), in the process that
    calls the kernel, never in the one that decides. ``sizes``: the module-level sizes as the
    catalog child fitted them (harness.reference.sizing), applied as they are: the judges and the
    kernel processes neither measure nor probe them again; ``real``: with them, whether the real sizes
    run as one case of their own on a GPU (as the catalog child decided). Once per process and pair
    of files."""
    import torch

    from harness.registry.registry import REGISTRY, register_kernel
    from harness.ops.reference import absolute, from_reference

    key = (str(Path(problem).resolve()), str(Path(candidate).resolve()) if candidate else None)
    if key in _DECLARED:
        return _DECLARED[key]
    mod = _import(problem, "--reference", pins)
    Model = _need(mod, "Model", "--reference", problem, "the reference nn.Module")
    get_inputs = _need(mod, "get_inputs", "--reference", problem, "the example inputs")
    get_init_inputs = _need(mod, "get_init_inputs", "--reference", problem, "Model's constructor arguments")
    scaling = SCALING[key[0]] = _fit(mod, Model, problem) if sizes is None else sizing_given(mod, sizes, real)
    torch.manual_seed(SEED)
    init = list(_call(f"--reference {problem}: get_init_inputs()", get_init_inputs))
    torch.manual_seed(SEED)
    inputs = list(_call(f"--reference {problem}: get_inputs()", get_inputs))
    torch.manual_seed(SEED)
    model = _call(f"--reference {problem}: Model(*get_init_inputs())", Model, *init)
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"--reference {problem}: Model is not a torch.nn.Module")
    model.eval()
    representable(model)
    model64 = _float64(model)
    name = op_name(problem)
    try:  # a bool input is a mask, an integer output compared exactly (harness.ops.reference)
        op = from_reference(_OnDevice(model64), inputs, vary="auto", name=name,
                            differentiable=False, dtypes=None if low_precision else _example_dtypes(inputs),
                            magnitude=_OnDevice(absolute(model64)),
                            doc=f"{name}: the KernelBench problem {Path(problem).name}, Model's forward in float64.")
    except Exception as exc:  # the reference refuses its own inputs, or they are of a kind no op takes
        if scaling.scaled:  # at sizes scaled to fit, not the problem's own: say which, and what to do
            sizes = ", ".join(f"{k} {a}->{b}" for k, (a, b) in scaling.sizes.items())
            raise UsageError(f"--reference {problem}: the reference rejects its inputs at the sizes scaled to fit this "
                             f"machine ({sizes}): {type(exc).__name__}: {_first_line(exc)}; the model ties sizes that "
                             "are scaled apart (a layer sized by one constant applied to a dim computed from others): "
                             "set the problem's module-level sizes within the budget yourself, keeping the tie") from None
        raise UsageError(f"--reference {problem}: {type(exc).__name__}: {_first_line(exc)}") from None
    if scaling.real:  # one case at the real sizes on a GPU (harness.reference.sizing)
        from harness.reference import sizing

        op.real, why = sizing.real_dims(mod, op.decl.inputs, op.example, op.fixed)
        if op.real is None:
            scaling.real, scaling.real_why = False, why
    if candidate is not None and REGISTRY._captured is None:
        _register_candidate(op, model, init, inputs, candidate, register_kernel, pins, detect)
    if candidate is not None and REGISTRY._loading_plugin:  # repros name the two files, not the generated plugin
        from harness.cases.case import GENERATED_PLUGINS

        GENERATED_PLUGINS[os.path.abspath(REGISTRY._loading_plugin)] = (
            "--reference", os.path.abspath(problem), "--candidate", os.path.abspath(candidate))
    _DECLARED[key] = op
    return op


def _example_dtypes(inputs: list) -> tuple:
    """The float dtypes of the example inputs: the problem's own precision (fp16 / bf16 cases of
    an fp32 problem are opt-in, ``verify --low-precision``: the reference run eagerly in fp16
    overflows and cancels as the candidate does, and such a case tells nothing of the candidate)."""
    import torch

    from harness.ops import strategies

    found = tuple(dict.fromkeys(a.dtype for a in inputs if isinstance(a, torch.Tensor) and a.is_floating_point()))
    return tuple(d for d in found if d in strategies.DTYPES) or (torch.float32,)


def _fit(mod, Model, problem: str):
    """The problem's sizes scaled, in place, to fit this backend (harness.reference.sizing)."""
    import torch

    from harness.reference import sizing
    from harness.run import backend as backends

    def accepts() -> bool:
        try:
            torch.manual_seed(SEED)
            model = Model(*mod.get_init_inputs())
            with torch.no_grad():
                model(*mod.get_inputs())
        except Exception:  # noqa: BLE001 - the reference refuses these sizes: the floor rises
            return False
        return True

    try:
        return sizing.fit(mod, Model, backend=backends.current().name, accepts=accepts)
    except sizing.DoesNotFit as exc:
        raise UsageError(f"--reference {problem}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - get_inputs() fails on the meta device: sized as given
        return sizing.Scaling(budget=f"not measured: get_inputs() on the meta device raised {type(exc).__name__}")


def sizing_given(mod, sizes: dict, real: bool = False):
    """``sizes`` (name -> the fitted size; a list is a tuple of sizes) applied to the problem's
    module as ``_fit`` would have left it; ``real``: whether the real sizes run as a case too."""
    from harness.reference import sizing

    scaling = sizing.apply_fitted(mod, {k: tuple(v) if isinstance(v, list) else v for k, v in sizes.items()})
    scaling.real = bool(real)
    return scaling


def fitted_sizes(found: dict | None) -> dict | None:
    """The sizes to hand to ``declare(sizes=...)`` from the catalog child's record of the fit
    (``catalog.KERNELBENCH[path]``), or None where it has none (the fit is then made again)."""
    record = (found or {}).get("sizes") or {}
    if not isinstance(record.get("sizes"), dict):
        return None
    return {k: new for k, (_, new) in record["sizes"].items()}


def fitted_real(found: dict | None) -> bool:
    """Whether the catalog child's fit runs the real sizes as a case of their own (a GPU's)."""
    return bool(((found or {}).get("sizes") or {}).get("real_case"))


def _float64(model):
    import torch

    out = copy.deepcopy(model).to(torch.float64)
    for p in out.parameters():
        p.requires_grad_(False)
    return out


class _OnDevice:
    """A module called on the device of its first tensor argument (a copy per device)."""

    def __init__(self, module) -> None:
        self.module, self.copies = module, {}
        self.forward = module.forward  # for the input names (harness.ops.reference)

    def __call__(self, *args):
        import torch

        device = next((a.device for a in args if isinstance(a, torch.Tensor)), torch.device("cpu"))
        if device not in self.copies:
            self.copies[device] = self.module if device.type == "cpu" else copy.deepcopy(self.module).to(device)
        return self.copies[device](*args)

    def cast(self, dtype) -> "_OnDevice":
        """The module with its float parameters and buffers in ``dtype`` (harness.ops.reference.in_dtype)."""
        return _OnDevice(copy.deepcopy(self.module).to(dtype))


def _register_candidate(op, model, init: list, inputs: list, candidate: str, register_kernel,
                        pins: dict | None = None, detect: bool = True) -> None:
    import torch

    from harness.registry.registry import Contract

    mod = _import(candidate, "--candidate", pins)
    ModelNew = _need(mod, "ModelNew", "--candidate", candidate, "the candidate nn.Module")
    torch.manual_seed(SEED)
    new = _call(f"--candidate {candidate}: ModelNew(*get_init_inputs())", ModelNew, *init)
    if not isinstance(new, torch.nn.Module):
        raise UsageError(f"--candidate {candidate}: ModelNew is not a torch.nn.Module")
    new.eval()
    _copy_weights(model, new, candidate)
    from harness import shortcut
    from harness.run import backend

    # before any case (its state untouched); a candidate that ends the process here ends a kernel process
    found = (shortcut.detect(model, new, inputs, backend.current().device)
             if detect and DETECT_SHORTCUTS else None)
    copies: dict = {}

    def kernel(*args):
        first = next(a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point())
        key = (first.device, first.dtype)
        if key not in copies:
            copies[key] = copy.deepcopy(new).to(device=first.device, dtype=first.dtype)
        # KernelBench's mode, torch.no_grad, unless the caller asks for another: torch.inference_mode,
        # or a forward with autograd whose inputs require grad (harness.run.runner's grad_modes)
        asks = torch.is_inference_mode_enabled() or (
            torch.is_grad_enabled() and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args))
        with contextlib.nullcontext() if asks else torch.no_grad():
            return copies[key](*args)

    kernel.__doc__ = f"ModelNew of {Path(candidate).name}, with the reference's weights, in the case's dtype"
    # the op is declared forward only (differentiable=False): so is the verdict, "PASS (forward only)"
    register_kernel(op.name, name=kernel_name(candidate), contract=Contract(forward_only=True))(kernel)
    from harness.registry.registry import REGISTRY

    REGISTRY.get(op.name, kernel_name(candidate)).meta["shortcut"] = found  # verify.json's ``shortcut``


def _copy_weights(model, new, candidate: str) -> None:
    """Model's parameters and buffers into ModelNew: by name, else in order where the shapes agree."""
    import torch

    state, theirs = model.state_dict(), new.state_dict()
    if not state:
        return
    try:
        new.load_state_dict(state)
        return
    except RuntimeError:
        pass
    mine = list(state.values())
    if len(mine) == len(theirs) and all(a.shape == b.shape for a, b in zip(mine, theirs.values())):
        with torch.no_grad():
            new.load_state_dict(dict(zip(theirs, mine)))
        return
    raise UsageError(f"--candidate {candidate}: ModelNew's parameters and buffers "
                     f"({', '.join(f'{k}{tuple(v.shape)}' for k, v in theirs.items()) or 'none'}) do not match Model's "
                     f"({', '.join(f'{k}{tuple(v.shape)}' for k, v in state.items())}); the harness copies Model's "
                     "weights into ModelNew")


PLUGIN = '''"""Generated by `verify --reference {problem} --candidate {candidate}`."""
from harness.kernelbench import declare

declare({problem!r}, {candidate!r}, pins={pins!r}, low_precision={low_precision!r}, sizes={sizes!r}, real={real!r})
'''


def write_plugin(args, sizes: dict | None, real: bool = False) -> None:
    """The generated plugin of ``use_in_verify``, pinned (every process loads it); written again
    with ``sizes`` once the catalog child has fitted the problem (harness.cli.verify), before any
    judge or kernel process starts, so that they apply the fit instead of making it again."""
    plugin, fields = args.kernelbench_plugin
    plugin.write_text(PLUGIN.format(**fields, sizes=sizes, real=real))
    _PINNED[str(plugin)] = {"copy": str(plugin), "sha256": sha256(plugin)}


def use_in_verify(args) -> None:
    """``--reference`` / ``--candidate``: pin both files, then verify the candidate as a plugin
    kernel of the problem's op, and that op only. Nothing of either file runs in this process (the
    one that decides): the generated plugin is loaded by the catalog child (a file that fails to
    import, or lacks Model / ModelNew / get_inputs, is reported from there as one line, exit 2),
    the judges and the kernel processes."""
    if not (args.reference and args.candidate):
        raise UsageError("--reference and --candidate go together: a KernelBench problem file and a file defining ModelNew")
    if args.op is not None or args.select != "*":
        raise UsageError("--reference/--candidate choose the op and the kernel; leave out --op and --select")
    from harness.cases.case import GENERATED_PLUGINS
    from harness.run import backend as backends

    backends.select(args.backend)  # before the candidate imports triton (in every process, through the environment)
    problem, candidate = str(Path(args.reference).resolve()), str(Path(args.candidate).resolve())
    for path, option in ((args.reference, "--reference"), (args.candidate, "--candidate")):
        if not Path(path).exists():
            raise UsageError(f"{option} {path}: file not found")
        if not Path(path).is_file():
            raise UsageError(f"{option} {path}: not a file")
    out = Path(args.report_dir).resolve() / "kernelbench"
    plugin = out / f"{op_name(problem)}__{kernel_name(candidate)}.py"
    pins = pin([problem, candidate], out / "pinned")  # before any user code runs
    args.pinned = {"reference": {"path": problem, "sha256": pins[problem]["sha256"]},
                   "candidate": {"path": candidate, "sha256": pins[candidate]["sha256"]}}
    low_precision = bool(getattr(args, "low_precision", False))
    out.mkdir(parents=True, exist_ok=True)
    args.kernelbench_plugin = (plugin, dict(problem=problem, candidate=candidate, pins=pins, low_precision=low_precision))
    write_plugin(args, None)
    GENERATED_PLUGINS[str(plugin)] = ("--reference", problem, "--candidate", candidate)  # repros name the two files
    args.plugin = [*args.plugin, str(plugin)]
    args.op = op_name(problem)
    args.no_cache = True  # the verdict's key follows the plugin's imports, not the two files
