"""Third-party Triton kernels, run as their authors wrote them, through the harness's runner.

    python scripts/third_party.py --populate MIRRORS [--dir third_party/]   copy the files below from
                                                                           local git mirrors (MIRRORS/<owner>+<name>/repo)
    python scripts/third_party.py [--dir third_party/] [--max-cases 4] [--out FILE.md]

The fetched files live in a git-ignored folder (``third_party/`` by default), one subfolder per
project holding the repository's own paths (``FILES``); nothing here is committed from them. Each
adapter loads a kernel from those files untouched: the project's package imports that need a GPU,
a model library or the project's own runtime are replaced by small stand-ins (``_stub``), and a
tutorial's module-level demo code (benchmarks on "cuda") is left out by loading its top-level
``@triton.jit`` functions only (``_jit_functions``). Every kernel then runs every check of the
harness's runner (harness.run.runner.run_case, the same records ``verify`` writes) on a spread of
small floor cases of its op on the Triton interpreter: one case per new dtype, value kind or
layout, smallest first, at most ``--max-cases``. The table printed says, kernel by kernel, PASS or
the failed checks with an example case id and the adjudication recorded for it in ``VERDICTS``
(docs/findings.md); a kernel that cannot run on the interpreter, or whose files are absent, is
listed as skipped with the reason.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import json
import os
import subprocess
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from harness import Contract  # noqa: E402

# project -> (GitHub repository, paths copied from it)
FILES = {
    "liger": ("linkedin/Liger-Kernel", ["src/liger_kernel/utils.py", "src/liger_kernel/ops/utils.py",
                                        "src/liger_kernel/ops/rms_norm.py", "src/liger_kernel/ops/softmax.py",
                                        "src/liger_kernel/ops/layer_norm.py"]),
    "unsloth": ("unslothai/unsloth", ["unsloth/kernels/utils.py", "unsloth/kernels/rms_layernorm.py"]),
    "flaggems": ("FlagOpen/FlagGems", ["src/flag_gems/ops/rms_norm.py", "src/flag_gems/utils/triton_lang_extension.py"]),
    "flash_attn": ("Dao-AILab/flash-attention", ["flash_attn/flash_attn_triton.py"]),
    # the repository is too large to mirror whole here: these two files were copied from the stored
    # index (02-fused-softmax.py at fd237c7, 05-layer-norm.py at 5456992, whose test and benchmark
    # tail, unused by the adapter, was left out)
    "triton": ("triton-lang/triton", ["python/tutorials/02-fused-softmax.py", "python/tutorials/05-layer-norm.py"]),
}


class Unavailable(Exception):
    """The kernel cannot be loaded or run here; the message says why."""


@dataclass
class Adapted:
    project: str
    op: str
    name: str
    fn: object
    contract: Contract = field(default_factory=Contract)
    note: str = ""
    interpreter: str = ""  # why it cannot run on the Triton interpreter (then it is listed, not run)


# ---------------------------------------------------------------- loading

def _package(name: str, path: Path | None = None) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__path__ = [str(path)] if path is not None else []
    return mod


@contextlib.contextmanager
def _stub(modules: dict[str, types.ModuleType]):
    """``modules`` in sys.modules while a file loads; what was there before is put back."""
    saved = {k: sys.modules.get(k) for k in modules}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


def _need(path: Path) -> Path:
    if not path.is_file():
        raise Unavailable(f"{path} absent (python scripts/third_party.py --populate MIRRORS)")
    return path


def _load_file(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, _need(path))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _jit_functions(path: Path, name: str, classes: tuple[str, ...] = ()) -> types.ModuleType:
    """The file's imports, top-level ``@triton.jit`` functions and the named classes (its host
    code), nothing else (no demo code)."""
    tree = ast.parse(_need(path).read_text(), str(path))
    keep = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
            and not any(a.name.startswith("triton.runtime") for a in n.names)
            and getattr(n, "module", "") != "triton.runtime"]
    keep += [n for n in tree.body if (isinstance(n, ast.FunctionDef) and any("jit" in ast.unparse(d) for d in n.decorator_list))
             or (isinstance(n, ast.ClassDef) and n.name in classes)]
    mod = types.ModuleType(name)
    mod.__file__ = str(path)  # triton's jit reads the function's source through inspect
    sys.modules[name] = mod
    import linecache
    src = path.read_text()
    linecache.cache[str(path)] = (len(src), None, src.splitlines(True), str(path))
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), mod.__dict__)
    return mod


def _top_level(path: Path, names: tuple[str, ...], into: dict) -> None:
    """Execute only the named top-level functions and assignments of a file into ``into``."""
    tree = ast.parse(_need(path).read_text())
    nodes = [n for n in tree.body
             if (isinstance(n, ast.FunctionDef) and n.name in names)
             or (isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
                 isinstance(t, ast.Name) and t.id in names for t in (n.targets if isinstance(n, ast.Assign) else [n.target])))]
    exec(compile(ast.Module(body=nodes, type_ignores=[]), str(path), "exec"), into)


# ---------------------------------------------------------------- adapters

def triton_tutorials(d: Path) -> list[Adapted]:
    import triton
    mod = _jit_functions(d / "triton/python/tutorials/02-fused-softmax.py", "tp_triton_softmax")

    def tutorial_softmax(x):
        # the tutorial's host code, less its device-property occupancy estimate: persistent programs
        # striding over the rows (num_programs = min(rows, a few), as its launch gives on a GPU)
        if x.dim() != 2 or x.stride(1) != 1:  # the limit its kernel assumes (it reads columns by 1), refused
            raise ValueError("tutorial softmax: x[M, N] with unit column stride")
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        mod.softmax_kernel[(min(n_rows, 4), 1, 1)](y, x, x.stride(0), y.stride(0), n_rows, n_cols,
                                                   triton.next_power_of_2(n_cols), 2)
        return y

    ln = _jit_functions(d / "triton/python/tutorials/05-layer-norm.py", "tp_triton_layer_norm", ("LayerNorm",))

    def tutorial_layer_norm_contiguous(x, w, b, eps):
        # the limit its kernels assume, declared and enforced before any launch
        if not (x.is_contiguous() and w.is_contiguous() and b.is_contiguous()):
            raise ValueError("tutorial layer norm: x, weight and bias must be contiguous")
        return ln.LayerNorm.apply(x, (x.shape[-1],), w, b, eps)
    return [Adapted("triton", "softmax", "tutorial_fused_softmax", tutorial_softmax,
                    Contract(forward_only=True, unit_stride=("x",), max_leading_dims=1),
                    "forward only (the tutorial has no backward); x[M, N] with unit column stride declared, the "
                    "wrapper refusing the others"),
            Adapted("triton", "layer_norm", "tutorial_layer_norm",
                    lambda x, w, b, eps: ln.LayerNorm.apply(x, (x.shape[-1],), w, b, eps)),
            Adapted("triton", "layer_norm", "tutorial_layer_norm_contiguous", tutorial_layer_norm_contiguous,
                    Contract(contiguous=("x", "weight", "bias", "upstream")),
                    "contiguous x, weight, bias and dy declared, the wrapper refusing the others: its kernels index "
                    "x, y, dy and dx rows by x's one row stride, columns by 1"),
            ]


# measured 2026-12-07, triton 3.9: the kernel raises InterpreterError on every case
INTERPRETER_SCALARS = ("the interpreter passes a float argument as a Python float where a GPU launch passes an fp32 "
                       "scalar, so the kernel's `eps.to(tl.float32)` raises AttributeError; with floats passed as "
                       "fp32 scalars, libdevice's `rsqrt` returns None there (`tl.store` raises TypeError): two "
                       "interpreter gaps, not the kernel's (GPU verdicts: docs/findings.md, Liger sections)")


FLASH_ATTN_TRITON2 = ("its host code asserts `q.is_cuda` (a CPU tensor never reaches the interpreter), and its kernels "
                      "are written for triton 2.0.0.dev20221202 (its header): `tl.dot(q, k, trans_b=True)` and "
                      "`trans_a=True`, arguments triton 3.9's `tl.dot` does not take (read from its source, not "
                      "compiled): it cannot compile on a current Triton, GPU or interpreter")


def liger(d: Path) -> list[Adapted]:
    src = d / "liger/src"
    _need(src / "liger_kernel/ops/rms_norm.py")
    with _stub({"liger_kernel": _package("liger_kernel", src / "liger_kernel"),
                "liger_kernel.ops": _package("liger_kernel.ops", src / "liger_kernel/ops")}):
        for m in [k for k in sys.modules if k.startswith("liger_kernel.")]:
            sys.modules.pop(m, None)
        rms = importlib.import_module("liger_kernel.ops.rms_norm")
        sm = importlib.import_module("liger_kernel.ops.softmax")
        ln = importlib.import_module("liger_kernel.ops.layer_norm")
    dtypes = (torch.float32, torch.bfloat16, torch.float16)
    return [
        Adapted("liger", "rmsnorm", "liger_rms_norm_gemma",
                lambda x, g, eps: rms.LigerRMSNormFunction.apply(x, g, eps, 0.0, "gemma", False),
                Contract(dtypes=dtypes), "casting_mode='gemma' (fp32 throughout), in_place=False", INTERPRETER_SCALARS),
        Adapted("liger", "softmax", "liger_softmax", lambda x: sm.LigerSoftmaxFunction.apply(x), Contract(dtypes=dtypes)),
        Adapted("liger", "softmax", "liger_softmax_declared", lambda x: sm.LigerSoftmaxFunction.apply(x),
                Contract(dtypes=dtypes, precision="input"),
                "Contract(precision=\"input\"): its backward starts from y as stored in the input dtype"),
        Adapted("liger", "layer_norm", "liger_layer_norm",
                lambda x, w, b, eps: ln.LigerLayerNormFunction.apply(x, w, b, eps), Contract(dtypes=dtypes),
                "", INTERPRETER_SCALARS),
    ]


def unsloth(d: Path) -> list[Adapted]:
    k = d / "unsloth/unsloth/kernels"
    utils = types.ModuleType("unsloth.kernels.utils")
    ns = {"triton": __import__("triton")}  # its launch settings, taken from its own utils.py
    _top_level(_need(k / "utils.py"), ("MAX_FUSED_SIZE", "next_power_of_2", "calculate_settings"), ns)
    utils.calculate_settings = ns["calculate_settings"]
    utils.torch_gpu_device = lambda device: contextlib.nullcontext()  # a CUDA device guard, nothing on the CPU
    llama = types.ModuleType("transformers.models.llama.modeling_llama")
    llama.LlamaRMSNorm = torch.nn.Module  # only subclassed by its Hugging Face patch, never called here
    with _stub({"unsloth": _package("unsloth"), "unsloth.kernels": _package("unsloth.kernels", k),
                "unsloth.kernels.utils": utils, "transformers": _package("transformers"),
                "transformers.models": _package("transformers.models"),
                "transformers.models.llama": _package("transformers.models.llama"),
                "transformers.models.llama.modeling_llama": llama}):
        mod = _load_file("unsloth.kernels.rms_layernorm", k / "rms_layernorm.py")
    def unsloth_contiguous(x, g, eps):
        # the limit its kernels assume (columns and the weight read with unit stride), refused
        if not (x.is_contiguous() and g.is_contiguous()):
            raise ValueError("unsloth rms_layernorm: x and weight must be contiguous")
        return mod.Fast_RMS_Layernorm.apply(x, g, eps, False)

    return [Adapted("unsloth", "rmsnorm", "unsloth_fast_rms_layernorm",
                    lambda x, g, eps: mod.Fast_RMS_Layernorm.apply(x, g, eps, False),
                    Contract(waive={"dgamma": "the backward returns no weight gradient (frozen weights, LoRA training)",
                                    "inputs_unchanged": "the backward writes dx into dy's storage (memory saving)"}),
                    "gemma=False; no weight gradient by design, dx written into dy"),
            Adapted("unsloth", "rmsnorm", "unsloth_fast_rms_layernorm_contiguous", unsloth_contiguous,
                    Contract(contiguous=("x", "gamma", "upstream"),
                             waive={"dgamma": "the backward returns no weight gradient (frozen weights, LoRA training)",
                                    "inputs_unchanged": "the backward writes dx into dy's storage (memory saving)"}),
                    "the same, with contiguous x, gamma and dy declared and the others refused")]


def flaggems(d: Path) -> list[Adapted]:
    rt = _package("flag_gems.runtime")
    rt.torch_device_fn = types.SimpleNamespace(device=lambda dev: contextlib.nullcontext())
    ut = _package("flag_gems.utils")
    ut.libentry = lambda *a, **k: (lambda fn: fn)  # FlagGems' launch cache: the jit function itself
    helper = types.ModuleType("flag_gems.utils.triton_lang_helper")
    helper.use_tl_extra = lambda fn: fn  # a per-backend shim (libdevice functions), unused by rms_norm
    gems = _package("flag_gems")
    gems.runtime = rt
    with _stub({"flag_gems": gems, "flag_gems.runtime": rt, "flag_gems.utils": ut,
                "flag_gems.utils.triton_lang_helper": helper, "flag_gems.ops": _package("flag_gems.ops")}):
        ut.triton_lang_extension = _load_file("flag_gems.utils.triton_lang_extension",
                                              d / "flaggems/src/flag_gems/utils/triton_lang_extension.py")
        mod = _load_file("flag_gems.ops.rms_norm", d / "flaggems/src/flag_gems/ops/rms_norm.py")
    return [Adapted("flaggems", "rmsnorm", "flaggems_rms_norm",
                    lambda x, g, eps: mod.rms_norm(x, [x.shape[-1]], g, eps))]


def flash_attn(d: Path) -> list[Adapted]:
    mod = _load_file("tp_flash_attn_triton", d / "flash_attn/flash_attn/flash_attn_triton.py")

    def flash_attn_triton(q, k, v, causal, scale):
        # its layout is (batch, seqlen, heads, headdim), one key/value head per query head
        o = mod.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), None, causal, scale)
        return o.transpose(1, 2)

    def same_heads(q, k, v, causal, scale):
        if q.shape[1] != k.shape[1]:
            return "one key/value head per query head (no GQA/MQA)"
        if q.shape[-1] not in (16, 32, 64, 128):
            return "head dims 16, 32, 64, 128 (its assertion)"
        return None

    return [Adapted("flash_attn", "attention", "flash_attn_triton", flash_attn_triton,
                    Contract(dtypes=(torch.float16, torch.bfloat16), rule=same_heads),
                    "fp16/bf16, Hq == Hkv, D in 16..128", FLASH_ATTN_TRITON2)]


ADAPTERS = (triton_tutorials, liger, unsloth, flaggems, flash_attn)

# (kernel, check) -> the adjudication of its failure (docs/findings.md, 2026-12-07)
TUTORIAL_LAYER_NORM = ("the kernel's bug, one for every check it fails: it indexes x, y, dy and dx by x's one row "
                      "stride and columns by 1. For x whose rows are padded (row stride > N; `reshape` keeps the "
                      "view) it stores y into `torch.empty_like(x)`, which is dense (row stride N): the last rows "
                      "land past y's end (heap corruption on the interpreter, `crash`); `forward` is wrong on "
                      "transposed x, `dx`, `dweight`, `dbias` on a dy of another layout than x. With those limits "
                      "declared and refused it passes (`tutorial_layer_norm_contiguous`)")
UNSLOTH_STRIDE = ("the kernel's bug on strided inputs: it reads x's columns and the weight with unit stride "
                  "(`W + col_offsets`; the weight's stride is passed and never used), so a weight of stride 2 "
                  "gives a wrong y and dx. With contiguous inputs declared and refused it passes "
                  "(`unsloth_fast_rms_layernorm_contiguous`)")
VERDICTS: dict[tuple[str, str], str] = {
    **{("unsloth_fast_rms_layernorm", c): UNSLOTH_STRIDE for c in ("forward", "dx")},
    **{("tutorial_layer_norm", c): TUTORIAL_LAYER_NORM for c in ("crash", "forward", "dx", "dweight", "dbias")},
    ("liger_softmax", "dx"): "the kernel's choice, undeclared: its backward starts from y as the forward stored it in "
                             "fp16/bf16 (as torch's own fp16 softmax does), beyond the fp32 model on fp16/bf16 dx; "
                             "declared with Contract(precision=\"input\") it passes (`liger_softmax_declared`)",
}


# ---------------------------------------------------------------- running

def spread(op: str, max_cases: int, max_elements: int = 4096) -> list:
    from harness.registry.registry import REGISTRY
    spec = REGISTRY.op(op)
    cases = sorted(spec.floor_cases(backend="interpreter"), key=lambda c: spec.make_inputs(c, "cpu").args[0].numel())
    seen, chosen = set(), []
    for c in cases:
        if spec.make_inputs(c, "cpu").args[0].numel() > max_elements:
            continue
        keys = {("values", c["values"]), ("layout", c["layout"]), ("dtype", c["dtype"])}
        if keys - seen:
            seen |= keys
            chosen.append(c)
    return chosen[:max_cases]


def verify(k: Adapted, max_cases: int) -> dict:
    from harness.registry.registry import REGISTRY, KernelEntry
    from harness.run.runner import run_case
    entry = KernelEntry(k.op, k.name, k.fn, k.contract, "kernel", "plugin", k.project)
    failed: dict[str, tuple[str, str]] = {}
    n = 0
    for c in spread(k.op, max_cases):
        n += 1
        print(f"case: {c.id}", file=sys.stderr, flush=True)  # the case a crash ends on (_verify_apart)
        try:
            recs = run_case(REGISTRY.op(k.op), entry, c, backend="interpreter", device="cpu").records
        except Exception as e:  # noqa: BLE001 - a kernel that breaks the interpreter is reported, not raised
            failed.setdefault("run", (c.id, f"{type(e).__name__}: {e}".splitlines()[0][:200]))
            continue
        for r in recs:
            if not r.passed and not r.waived:
                failed.setdefault(r.check, (r.case_id, r.message.splitlines()[0][:200]))
    return {"cases": n, "failed": failed}


def _verify_apart(d: Path, name: str, max_cases: int) -> dict:
    """``verify`` in a child process: a kernel that corrupts memory (a write past its buffer ends
    the process: "free(): invalid size") is reported as such instead of ending the table."""
    cmd = [sys.executable, __file__, "--dir", str(d), "--max-cases", str(max_cases), "--one", name]
    got = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"PYTHONWARNINGS": "ignore"})
    lines = [ln for ln in got.stdout.splitlines() if ln.startswith("{")]
    if got.returncode or not lines:
        err = got.stderr.strip().splitlines() or ["no output"]
        case = next((ln[6:] for ln in reversed(err) if ln.startswith("case: ")), "-")
        return {"cases": 0, "failed": {"crash": (case, f"the process ended (exit {got.returncode}): {err[-1][:200]}")}}
    return json.loads(lines[-1])


def _one(d: Path, name: str, max_cases: int) -> int:
    for adapter in ADAPTERS:
        for k in adapter(d):
            if k.name == name:
                print(json.dumps(verify(k, max_cases)), flush=True)
                return 0
    return 2


def table(rows: list[tuple[str, str, str, str]]) -> str:
    out = ["| project | kernel (op) | verdict | adjudication |", "|---|---|---|---|"]
    out += [f"| {p} | {k} | {v} | {a} |" for p, k, v, a in rows]
    return "\n".join(out)


def populate(mirrors: Path, d: Path) -> None:
    for project, (repo, paths) in FILES.items():
        git_dir = mirrors / repo.replace("/", "+") / "repo"
        for p in paths:
            dest = d / project / p
            dest.parent.mkdir(parents=True, exist_ok=True)
            got = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"HEAD:{p}"], capture_output=True)
            if got.returncode:
                print(f"{repo}:{p}: not in {git_dir}", file=sys.stderr)
                continue
            dest.write_bytes(got.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="third_party", help="the folder holding the fetched files")
    ap.add_argument("--populate", metavar="MIRRORS", help="copy FILES from local git mirrors into --dir, then exit")
    ap.add_argument("--max-cases", type=int, default=4, help="floor cases per kernel (default 4)")
    ap.add_argument("--select", default="", help="only kernels whose name contains this")
    ap.add_argument("--out", help="also write the table (markdown) to this file")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # one kernel's records, as JSON (the child process)
    a = ap.parse_args(argv)
    d = Path(a.dir)
    if a.one:
        return _one(d, a.one, a.max_cases)
    if a.populate:
        populate(Path(a.populate), d)
        return 0
    if not d.is_dir():
        print(f"third_party: no folder {d} (python scripts/third_party.py --populate MIRRORS)", file=sys.stderr)
        return 2
    rows = []
    for adapter in ADAPTERS:
        try:
            kernels = adapter(d)
        except Unavailable as e:
            rows.append((adapter.__name__, "-", "skipped", str(e)))
            continue
        except Exception as e:  # noqa: BLE001
            rows.append((adapter.__name__, "-", "skipped", f"does not load: {type(e).__name__}: {str(e).splitlines()[0][:160]}"))
            continue
        for k in kernels:
            if a.select not in k.name:
                continue
            if k.interpreter:
                rows.append((k.project, f"`{k.name}` ({k.op})", "skipped: not run on the interpreter", k.interpreter))
                print(table(rows[-1:]).splitlines()[-1], flush=True)
                continue
            res = _verify_apart(d, k.name, a.max_cases)
            if not res["failed"]:
                verdict, adj = f"PASS ({res['cases']} cases)", k.note
            else:
                verdict = "FAIL " + ", ".join(f"`{c}` on `{cid}`" for c, (cid, _) in res["failed"].items())
                adj = "; ".join(dict.fromkeys(VERDICTS.get((k.name, c), f"NOT ADJUDICATED: {m}")
                                              for c, (_, m) in res["failed"].items()))
            rows.append((k.project, f"`{k.name}` ({k.op})", verdict, adj))
            print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
