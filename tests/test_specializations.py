"""harness.run.specializations: the Triton specializations a suite would compile on CUDA, counted on
the interpreter from Triton's own key of each launch (dtypes, constexprs, ints equal to 1 or
divisible by 16, 16-byte alignment; ``do_not_specialize`` honoured), carried per case to verify."""

import torch
import triton
import triton.language as tl

from harness.registry.registry import REGISTRY, Contract, KernelEntry
from harness.run import specializations
from harness.run.runner import run_case


@triton.jit
def _copy(X, Y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n), mask=i < n)


@triton.jit(do_not_specialize=["n"])
def _copy_runtime_n(X, Y, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(Y + i, tl.load(X + i, mask=i < n), mask=i < n)


def _launch(kernel, dtype, n):
    x = torch.zeros(64, dtype=dtype)
    kernel[(1,)](x, torch.empty_like(x), n, BLOCK=64)


def test_one_key_per_dtype_constexpr_and_int_pattern():
    specializations.install()
    specializations.drain()
    for dtype, n in ((torch.float32, 16), (torch.float32, 32), (torch.float32, 7), (torch.float32, 9),
                     (torch.float32, 1), (torch.float16, 16)):
        _launch(_copy, dtype, n)
    keys = specializations.drain()
    # 16 and 32 share "divisible by 16", 7 and 9 share "neither", 1 is its own, fp16 its own
    assert len(keys) == 4, keys
    assert specializations.drain() == ()


def test_do_not_specialize_keeps_an_int_out_of_the_key():
    specializations.install()
    specializations.drain()
    for n in (1, 7, 16):
        _launch(_copy_runtime_n, torch.float32, n)
    assert len(specializations.drain()) == 1


def test_a_case_records_the_keys_its_calls_launched():
    spec = REGISTRY.op("softmax")
    case = spec.floor_cases(backend="interpreter")[0]
    entry = REGISTRY.get("softmax", "triton_softmax")
    run = run_case(spec, KernelEntry("softmax", "k", entry.fn, Contract(), "kernel", "test", "here"), case,
                   backend="interpreter", device="cpu")
    keys = run.records[0].specializations
    assert keys and all(k.startswith("kernels.softmax._softmax") for k in keys)


def _module(tmp_path, name, body):
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text("import triton\nimport triton.language as tl\n\n" + body)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_HELPER = "@triton.jit\ndef _half(x):\n    return x * {}\n\n"
_KERNEL = ("@triton.jit\ndef kernel(X, n, BLOCK: tl.constexpr):\n    i = tl.arange(0, BLOCK)\n"
           "    tl.store(X + i, _half(tl.load(X + i, mask=i < n)), mask=i < n)\n")


def test_a_kernel_source_digest_follows_its_code_and_its_jit_helpers(tmp_path):
    clean = _module(tmp_path, "clean_k", _HELPER.format("0.5") + _KERNEL)
    same = _module(tmp_path, "clean_k__mutant_0123abcd", _HELPER.format("0.5") + _KERNEL)
    helper_mutated = _module(tmp_path, "helper_m", _HELPER.format("0.25") + _KERNEL)
    kernel_mutated = _module(tmp_path, "kernel_m", _HELPER.format("0.5") + _KERNEL.replace("i < n)),", "i <= n)),"))
    digest = specializations.source(clean.kernel.fn)
    assert specializations.source(same.kernel.fn) == digest
    assert specializations.source(helper_mutated.kernel.fn) != digest
    assert specializations.source(kernel_mutated.kernel.fn) != digest
    # a mutant module's copy of an unchanged kernel has the clean kernel's key: one compile on CUDA
    x = torch.zeros(16)
    keys = {specializations.key(m.kernel, (x, 5), {"BLOCK": 16}) for m in (clean, same)}
    assert len(keys) == 1 and next(iter(keys)).startswith("clean_k.kernel#"), keys


def test_the_campaign_counts_a_key_once_per_kernel_source():
    from harness.mutation.campaign import specializations as campaign_count
    from harness.mutation.outcome import Outcome, Status

    def outcome(name, keys):
        entry = KernelEntry("softmax", name, None, Contract(), "kernel", "test", "here", meta={"kernel": "triton_softmax"})
        return Outcome(entry, Status.KILLED, specializations=tuple(keys))

    shared = "kernels.softmax._fwd#aaaa(X:*fp32:D)"  # a kernel both mutants left as it was
    found = campaign_count([
        outcome("m1", [shared, "kernels.softmax._bwd#bbbb(X:*fp32:D)"]),
        outcome("m2", [shared, "kernels.softmax._bwd#cccc(X:*fp32:D)"]),
    ])
    assert found == {"total": 3, "shared_source": 2, "per_kernel": {"softmax/triton_softmax": 3},
                     "without_schemata": {"total": 3, "per_kernel": {"softmax/triton_softmax": 3}}}


def test_a_schemas_keys_count_once_and_each_mutant_alone_beside_them():
    from harness.mutation.campaign import specializations as campaign_count
    from harness.mutation.outcome import Outcome, Status

    def outcome(name, keys):
        entry = KernelEntry("softmax", name, None, Contract(), "kernel", "test", "here", meta={"kernel": "triton_softmax"})
        return Outcome(entry, Status.KILLED, specializations=tuple(keys))

    def schema_key(mutant):  # the schema's program, and the one the mutant built alone would compile
        return (f"kernels.softmax._bwd#5555(X:*fp32:D, MUTANT:i32){specializations.ALONE}"
                f"kernels.softmax._bwd#ab{mutant}(X:*fp32:D)")  # its fingerprint

    shared = "kernels.softmax._fwd#aaaa(X:*fp32:D)"
    found = campaign_count([outcome("m1", [shared, schema_key(1)]), outcome("m2", [shared, schema_key(2)]),
                            outcome("cat", [shared, "kernels.softmax._bwd#cccc(X:*fp32:D)"])])
    assert found["total"] == 3 and found["per_kernel"] == {"softmax/triton_softmax": 3}
    assert found["without_schemata"] == {"total": 4, "per_kernel": {"softmax/triton_softmax": 4}}
    assert found["shared_source"] == 2


def test_a_merged_campaign_keeps_each_parts_count_never_their_sum():
    from reports.merge import merge_mutation

    def part(i, spec):
        return (f"p{i}", {"shard": {"index": i, "count": 2}, "backend": "interpreter", "seed": 0, "mutants": [],
                          "sanity": {"passed": True, "reason": "ok", "runs": []}, "seconds": 1.0, "specializations": spec})

    a = {"total": 5, "shared_source": 2, "per_kernel": {"softmax/triton_softmax": 5}}
    b = {"total": 4, "shared_source": 2, "per_kernel": {"softmax/triton_softmax": 4}}
    merged = merge_mutation([part(0, a), part(1, b)])
    assert merged["specializations"] == {"parts": [a, b]}
