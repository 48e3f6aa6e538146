"""harness.mutation.mutagen: generated and catalog source mutants, re-jitted in memory (interpreter, in-process)."""

import hashlib
import importlib
import sys
from pathlib import Path

import pytest
import torch

from harness.mutation import mutagen
from harness.errors import HarnessError, RegistryError
from harness.registry.registry import REGISTRY
from harness.mutation.operators import HOST_OPERATORS, OPERATORS

KERNEL_FILE = Path(__file__).resolve().parent.parent / "kernels" / "rmsnorm.py"


def _digest() -> str:
    return hashlib.sha1(KERNEL_FILE.read_bytes()).hexdigest()


def test_generation_is_deterministic_so_a_worker_can_rebuild_a_mutant_by_name():
    first = [(m.function, m.operator, m.index, m.diff) for m in mutagen.mutations("kernels.rmsnorm")]
    second = [(m.function, m.operator, m.index, m.diff) for m in mutagen.mutations("kernels.rmsnorm")]
    assert first == second and len(first) > 50
    assert len({(f, o, i) for f, o, i, _ in first}) == len(first)  # names are unique


def test_every_jit_function_of_the_kernels_package_is_mutated():
    assert "kernels.rmsnorm" in mutagen.project_modules()
    functions = {m.function for m in mutagen.mutations("kernels.rmsnorm") if m.operator in OPERATORS}
    assert functions == {"_rmsnorm_forward", "_rows_of", "_rmsnorm_backward", "_sum_partials"}
    # the host code: the wrapper that launches the backward with x's and dy's strides
    host = {m.function for m in mutagen.mutations("kernels.rmsnorm") if m.operator in HOST_OPERATORS}
    assert host == {"_backward"}


def test_block_divisor_mutant_runs_through_the_real_wrapper_and_disk_is_untouched():
    # bug class: the tutorial's exercise, BLOCK as the divisor of the forward mean
    before = _digest()
    (mutation,) = [
        m for m in mutagen.mutations("kernels.rmsnorm")
        if m.function == "_rmsnorm_forward" and m.operator == "size_block_swap" and "/ BLOCK + eps" in m.diff
    ]
    fn = mutagen.SourceMutant("kernels.rmsnorm", "triton_rmsnorm", "test.block_divisor", lambda: mutation.source)
    x = torch.ones(1, 257)
    y = fn(x, torch.ones(257), 1e-6)
    assert y[0, 0].item() == pytest.approx(1.411458, abs=1e-5)  # the tutorial's figure; correct is 0.9999995
    assert _digest() == before
    assert REGISTRY.get("rmsnorm", "triton_rmsnorm").fn(x, torch.ones(257), 1e-6)[0, 0].item() == pytest.approx(0.9999995, abs=1e-6)


def test_a_mutant_that_does_not_compile_is_marked_incompetent():
    # bug class: incompetent mutants must never count as killed
    source, _, _ = mutagen.patch_source("kernels.rmsnorm", "_rmsnorm_forward", [("cols = tl.arange(0, BLOCK)", "cols = tl.arange(0, N)")])
    fn = mutagen.SourceMutant("kernels.rmsnorm", "triton_rmsnorm", "test.arange_of_runtime_n", lambda: source)
    with pytest.raises(Exception):
        fn(torch.ones(2, 8), torch.ones(8), 1e-6)
    reason = fn.incompetent  # the kernel process sends it with the call's reply
    assert reason and "constexpr" in reason


def test_a_harness_guard_error_is_not_incompetence():
    class Guarded(HarnessError):
        pass

    try:
        try:
            raise Guarded("out of bounds")
        except Guarded as inner:
            raise RuntimeError("wrapped") from inner
    except RuntimeError as exc:
        assert mutagen.incompetence(exc) is None


def test_catalog_patch_must_match_exactly_once():
    with pytest.raises(RegistryError, match="exactly once.*update the catalog entry"):
        mutagen.patch_source("kernels.rmsnorm", "_rmsnorm_forward", [("tl.no_such_call(", "x")])
    with pytest.raises(RegistryError, match="does not define"):
        mutagen.patch_source("kernels.rmsnorm", "_no_such_function", [("x", "y")])


def test_catalog_has_ten_distinct_bug_classes_including_the_tutorials():
    # what this test registers goes again at its end, and a catalog it imported first is imported
    # afresh by the next loader (tests that run after it, such as the campaign's, see every entry)
    before, fresh = set(REGISTRY.entries), "properties.mutants.rmsnorm" not in sys.modules
    module = importlib.import_module("properties.mutants.rmsnorm")
    try:
        names = {c["name"] for c in module.CATALOG}
        assert len(module.CATALOG) >= 10 and len(names) == len(module.CATALOG)
        assert {"cat.block_divisor_forward", "cat.block_divisor_backward", "cat.dgamma_mean", "cat.r_squared",
                "cat.row_offset_block"} <= names
        assert all(c["why"].strip() for c in module.CATALOG)
        assert len({str(c.get("patches") or (c["old"], c["new"])) for c in module.CATALOG}) == len(module.CATALOG)
        entry = REGISTRY.get("rmsnorm", "cat.r_squared")
        assert entry.origin == "catalog" and entry.kind == "mutant" and "-" in entry.meta["diff"]
    finally:
        for key in set(REGISTRY.entries) - before:
            del REGISTRY.entries[key]
        if fresh:
            sys.modules.pop("properties.mutants.rmsnorm", None)


def test_an_unparseable_mutant_is_incompetent():
    fn = mutagen.SourceMutant("kernels.rmsnorm", "triton_rmsnorm", "test.unparseable", lambda: "def broken(:\n")
    with pytest.raises(SyntaxError):
        fn(torch.ones(2, 8), torch.ones(8), 1e-6)
    assert "does not build" in fn.incompetent


def test_a_catalog_race_is_observable_on_the_gpu_only():
    # a bug only a GPU can show (the hybrid's in-place G without its barrier): declared with
    # backends=["cuda"], listed apart and never scored under the interpreter
    from harness.mutation import campaign

    module = importlib.import_module("properties.mutants.fused_linear_cross_entropy_hybrid")
    race = next(c for c in module.CATALOG if c["name"] == "cat.hybrid_in_place_without_barrier")
    plain = next(c for c in module.CATALOG if "backends" not in c)
    assert race["backends"] == ["cuda"]
    mutagen.register_catalog(module.OP, kernel=module.KERNEL, module=module.MODULE,
                             entries=[dict(race, name="test.gpu_only"), dict(plain, name="test.anywhere")])
    try:
        gpu_only, anywhere = REGISTRY.get(module.OP, "test.gpu_only"), REGISTRY.get(module.OP, "test.anywhere")
        assert gpu_only.meta["backends"] == ["cuda"] and "tl.debug_barrier()" in gpu_only.meta["diff"]
        assert campaign.observable_on(gpu_only, "cuda") and not campaign.observable_on(gpu_only, "interpreter")
        assert "backends" not in anywhere.meta and campaign.observable_on(anywhere, "interpreter")
    finally:
        for key in [k for k, e in REGISTRY.entries.items() if e.name.startswith("test.")]:
            del REGISTRY.entries[key]


def test_the_saved_picks_give_the_same_mutants_as_computing_them(tmp_path, monkeypatch):
    # bug class: a cache of generated mutants that drifts from the generator (other names,
    # indices or sources for the same kernel file) would re-key every saved outcome and hint
    monkeypatch.setattr(mutagen._Picks, "FOLDER", tmp_path / "mutagen")
    module = "kernels.softmax"
    computed = mutagen.mutations(module)
    assert list((tmp_path / "mutagen").glob("kernels.softmax-*.json"))  # saved for the next run
    saved = mutagen.mutations(module)

    def shape(ms):
        return [(m.function, m.operator, m.index, m.location, m.diff, m.source) for m in ms]

    assert computed and shape(saved) == shape(computed)
    # another source is another key: nothing saved for it is used
    monkeypatch.setattr(mutagen.inspect, "getsource", lambda obj, real=mutagen.inspect.getsource:
                        real(obj) + ("\n# edited\n" if getattr(obj, "__name__", "") == module else ""))
    mutagen.mutations(module)
    assert len(list((tmp_path / "mutagen").glob("kernels.softmax-*.json"))) == 2
