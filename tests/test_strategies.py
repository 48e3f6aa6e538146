"""properties.strategies: argument validation, and the sizes that expose bugs are produced."""

import pytest
import torch
from hypothesis import find, settings
from hypothesis.errors import InvalidArgument

from harness.registry.registry import REGISTRY
from properties import layouts, strategies


@pytest.mark.parametrize(
    "call",
    [
        lambda: strategies.sizes(max_value=-1),
        lambda: strategies.sizes(min_value=5, max_value=2),
        lambda: strategies.sizes(max_value=10, special=[1.5]),
        lambda: strategies.dtypes(allowed=[torch.int32]),
        lambda: strategies.layouts(allowed=["diagonal"]),
        lambda: strategies.boundary_sizes(max_value=0),
    ],
)
def test_bad_arguments_fail_when_the_strategy_is_built(call):
    with pytest.raises(InvalidArgument):
        call()


def test_boundary_sizes_hold_block_neighbours_and_primes():
    sizes = strategies.boundary_sizes(max_value=8192)
    for n in (1, 255, 256, 257, 4095, 4097, 8191, 8192, 13):
        assert n in sizes
    assert max(sizes) <= 8192


@pytest.mark.parametrize("predicate", [lambda c: c["N"] == 257, lambda c: c["M"] == 17, lambda c: c["M"] == 1,
                                       lambda c: c["dtype"] == "bfloat16", lambda c: c["layout"] == "transposed"])
def test_rmsnorm_generator_produces_the_cases_that_matter(predicate):
    spec = REGISTRY.op("rmsnorm")
    found = find(spec.case_strategy(backend="interpreter"), predicate, settings=settings(max_examples=2000, database=None))
    assert predicate(found)


def test_rmsnorm_floor_holds_the_tutorial_shapes_in_every_dtype_and_layout():
    floor = REGISTRY.op("rmsnorm").floor_cases(backend="interpreter")
    assert len(floor) >= 72
    combos = {(c["M"], c["N"], c["dtype"], c["layout"]) for c in floor}
    for dtype in ("float32", "float16", "bfloat16"):
        for layout in strategies.LAYOUTS:
            assert (17, 257, dtype, layout) in combos and (1, 256, dtype, layout) in combos


@pytest.mark.parametrize("layout", strategies.LAYOUTS)
def test_layouts_hold_the_values_with_nan_padding_around(layout):
    v = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    placed = layouts.place(v, layout, "cpu")
    assert torch.equal(placed, v)
    if layout in ("transposed", "col_sliced"):
        assert not placed.is_contiguous()
    storage = torch.tensor([], dtype=torch.float32).set_(placed.untyped_storage())
    assert storage.numel() >= v.numel()
    if layout in ("col_sliced", "offset"):
        assert torch.isnan(storage).any()
