"""harness.ops.strategies: argument validation, and the sizes that expose bugs are produced."""

import pytest
import torch
from hypothesis import find, settings
from hypothesis.errors import InvalidArgument

from harness.registry.registry import REGISTRY
from harness.ops import layouts, strategies


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


def test_rmsnorm_floor_holds_the_tutorial_shapes_in_every_dtype_and_every_layout():
    spec = REGISTRY.op("rmsnorm")
    floor = spec.floor_cases(backend="interpreter")
    assert len(floor) >= 72
    shapes = {(c["M"], c["N"], c["dtype"]) for c in floor}
    for dtype in ("float32", "float16", "bfloat16"):
        # one element, N == BLOCK, N = BLOCK +- 1, the tutorial's benchmark shape, N past 4096
        for m, n in ((1, 1), (7, 255), (7, 256), (7, 257), (128, 257), (4, 8191), (4, 8192)):
            assert (m, n, dtype) in shapes
        assert {c["layout"] for c in floor if c["dtype"] == dtype} == set(spec.layouts) | set(spec.apart_layouts)
    assert set(spec.layouts) == set(strategies.LAYOUTS) | {layouts.MIXED, layouts.MIXED_ALT}
    eps = {c["eps"] for c in floor}
    assert eps == {1e-6, 1e-5, 1e-12, 0.1}
    gpu = spec.floor_cases(backend="cuda")
    assert {c["dtype"] for c in gpu if (c["M"], c["N"]) == (32769, 97)} == {"float32", "float16", "bfloat16"}
    assert {(c["layout"], c.get(layouts.WIDE)) for c in gpu if c["layout"] in layouts.INDEX_WIDTH_LAYOUTS} == {
        (layouts.INDEX_WIDTH_ROWS, "x"), (layouts.INDEX_WIDTH_ROWS, "gamma"), (layouts.INDEX_WIDTH_ROWS, layouts.UPSTREAM),
        (layouts.INDEX_WIDTH_COLS, "x"), (layouts.INDEX_WIDTH_COLS, layouts.UPSTREAM)}
    assert not any(c["layout"] in layouts.INDEX_WIDTH_LAYOUTS or c["M"] == 32769 for c in floor)


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
