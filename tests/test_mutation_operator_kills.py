"""Each GPU / softmax-family mutation operator, applied to a small fixture kernel through the
campaign's own path (generated.register_module_mutants -> SourceMutant, re-jitted in memory), yields
a mutant the interpreter tells apart from the original: killed. The barrier and int64 operators
cannot be observed there (one sequential thread per program; CPU-sized offsets: only the CUDA
floor's index-width cases pass 2**31 elements), so their mutants must carry backends=["cuda"]
and be left out of a CPU campaign instead of surviving it."""

import importlib
import sys

import pytest
import torch

from harness.mutation import campaign, mutagen
from harness.mutation import generated as generated_mutants
from harness.registry.registry import REGISTRY

MODULE = "tests.fixtures.operator_targets"


@pytest.fixture(scope="module")
def kernels():
    """The fixture's kernel entries, captured (never added to the registry verify runs)."""
    sys.modules.pop(MODULE, None)
    with REGISTRY.capturing() as captured:
        importlib.import_module(MODULE)
    return {e.name: e for e in captured}


def generated(kernels, kernel: str, function: str, operator: str) -> list:
    """The generated mutants of one jit function by one operator, as the campaign registers them."""
    with REGISTRY.capturing() as captured:
        generated_mutants.register_module_mutants(MODULE, [kernels[kernel]])
    prefix = f"gen.{function.lstrip('_')}.{operator}."
    found = [e for e in captured if e.name.startswith(prefix)]
    assert found, f"{operator} generated no mutant of {function}"
    return found


def changed_lines(entry) -> list[str]:
    """The diff's removed and added lines, without their sign and indentation."""
    return [line[1:].strip() for line in entry.meta["diff"].splitlines() if line[:1] in "+-"]


def differs(a, b) -> bool:
    pairs = zip(a, b) if isinstance(a, tuple) else [(a, b)]
    return any(not torch.equal(x, y) for x, y in pairs)


def assert_killed(mutant, original, *args):
    """The mutant builds, runs and gives another output than the (checked) original."""
    out = mutant.fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    assert mutant.fn.incompetent is None  # competent: it compiled and ran
    assert differs(out, original), f"{mutant.name} survived:\n{mutant.meta['diff']}"
    assert campaign.observable_on(mutant, "interpreter") and "backends" not in mutant.meta


def softmax_input() -> torch.Tensor:
    # 6 of 8 lanes used (padding exists); all values negative, so a padding 0 would be the max
    return -1.0 - torch.rand(3, 6, generator=torch.Generator().manual_seed(0))


def original_softmax(kernels):
    x = softmax_input()
    y, top = kernels["row_softmax"].fn(x)
    torch.testing.assert_close(y, torch.softmax(x, dim=1))
    torch.testing.assert_close(top, x.amax(dim=1))
    return x, (y, top)


def test_other_neg_inf_to_zero_is_killed(kernels):
    # bug class: masked-off lanes read 0, not max's identity -inf; the row max of negatives is 0
    x, original = original_softmax(kernels)
    (mutant,) = generated(kernels, "row_softmax", "_row_softmax", "other_neg_inf_to_zero")
    assert mutant.name == "gen.row_softmax.other_neg_inf_to_zero.1"
    assert "other=0.0" in changed_lines(mutant)[1] and "-float('inf')" in changed_lines(mutant)[0]
    assert_killed(mutant, original, x)
    assert torch.all(mutant.fn(x)[1] == 0.0)  # the masked max sees 0 instead of -inf


def test_exp2_drop_log2e_is_killed(kernels):
    # bug class: exp2(x) where exp(x) = exp2(x * log2(e)) was meant: a base-2 softmax
    x, original = original_softmax(kernels)
    (mutant,) = generated(kernels, "row_softmax", "_row_softmax", "exp2_drop_log2e")
    assert changed_lines(mutant)[1] == "e = tl.exp2(x - top)"
    assert_killed(mutant, original, x)


def test_reduction_axis_swap_is_killed_by_keyword_and_by_position(kernels):
    # bug class: a row reduction turned into a column reduction
    x = torch.randn(8, 8, generator=torch.Generator().manual_seed(1))
    original = kernels["tile_row_reductions"].fn(x)
    torch.testing.assert_close(original[0], x.sum(dim=1))
    torch.testing.assert_close(original[1], x.amax(dim=1))
    mutants = generated(kernels, "tile_row_reductions", "_tile_row_reductions", "reduction_axis_swap")
    by_change = {changed_lines(m)[1]: m for m in mutants}
    assert set(by_change) == {
        "tl.store(SUMS + rows, tl.sum(x, axis=0), mask=rows < M)",
        "tl.store(MAXES + rows, tl.max(x, 0), mask=rows < M)",
    }
    for mutant in mutants:
        assert_killed(mutant, original, x)


def window_case(kernels):
    x = torch.randn(2, 10, generator=torch.Generator().manual_seed(2))
    original = kernels["window"].fn(x, 3, 6)
    expected = torch.zeros_like(x)
    expected[:, 3:7] = x[:, 3:7]
    torch.testing.assert_close(original, expected)
    return x, original


def test_where_branch_swap_is_killed(kernels):
    # bug class: the condition read the wrong way round: the window is zeroed, the rest kept
    x, original = window_case(kernels)
    (mutant,) = generated(kernels, "window", "_window", "where_branch_swap")
    assert "tl.where(keep, 0.0, x)" in changed_lines(mutant)[1]
    assert_killed(mutant, original, x, 3, 6)


def test_mask_and_to_or_is_killed(kernels):
    # bug class: a lane passes when either bound holds: the whole row is kept
    x, original = window_case(kernels)
    (mutant,) = generated(kernels, "window", "_window", "mask_and_to_or")
    assert changed_lines(mutant)[1] == "keep = (cols >= lo) | (cols <= hi)"
    assert_killed(mutant, original, x, 3, 6)


def assert_gpu_only(mutant, original, *args, backends=("cuda",)):
    """Listed apart where it cannot be observed, scored where it can; and indeed invisible to the
    interpreter."""
    assert mutant.meta["backends"] == list(backends)
    assert campaign.observable_on(mutant, "cuda") == ("cuda" in backends)
    assert not campaign.observable_on(mutant, "interpreter")
    assert not differs(mutant.fn(*args), original)


def test_drop_barrier_mutant_is_marked_gpu_only(kernels):
    # bug class: lane c stores where lane N-1-c loaded; without the barrier warps race on a GPU
    x = torch.arange(12.0).reshape(2, 6)
    original = kernels["reverse_rows_in_place"].fn(x.clone())
    torch.testing.assert_close(original, x.flip(1))
    (mutant,) = generated(kernels, "reverse_rows_in_place", "_reverse_rows_in_place", "drop_barrier")
    assert changed_lines(mutant) == ["tl.debug_barrier()", "pass"]
    assert_gpu_only(mutant, original, x.clone())


def test_drop_int64_cast_mutants_are_scored_on_cuda_and_listed_apart_on_the_interpreter(kernels):
    # bug class: int32 row * stride overflows past 2**31 elements; only the CUDA floor's
    # index-width cases reach that (harness.ops.layouts), so these mutants are scored on cuda
    # and listed apart on the interpreter rather than counted as its survivors
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(3))
    original = kernels["copy_rows"].fn(x)
    torch.testing.assert_close(original, x)
    mutants = generated(kernels, "copy_rows", "_copy_rows", "drop_int64_cast")
    changes = sorted(changed_lines(m)[1] for m in mutants)
    assert changes == [
        "row = tl.program_id(0)",
        "tl.store(Y + row * stride_y + cols, x, mask=cols < N)",
    ]
    for mutant in mutants:
        assert_gpu_only(mutant, original, x)
