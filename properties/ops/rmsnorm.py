"""The ``rmsnorm`` op: y = x / sqrt(mean(x^2) + eps) * gamma over the rows of x[M, N].

Kernel signature: ``f(x[M, N], gamma[N], eps: float) -> y[M, N]`` with ``y.dtype == x.dtype``,
differentiable in x and gamma. Checks: forward, dx, dgamma, plus the common ones. On CUDA the
floor also holds index-width cases (properties.layouts): x, gamma or dy, named by the case's
``wide``, stretched so that an int32 element offset overflows; the strategy never draws them.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from harness.cases.case import Case
from harness.registry.opspec import Meta, OpInputs, OpSpec
from harness.registry.registry import register_op
from oracles.rmsnorm import rmsnorm_backward, rmsnorm_backward_magnitudes, rmsnorm_reference
from properties import case_params, layouts, strategies, values

EPS_VALUES = (1e-6, 1e-5, 1e-12, 0.1)
SPECIAL_M = (1, 2, 3, 17, 31, 64, 127, 128, 129, 255, 256, 257)
MAX_M = 300
MAX_N = 8192
# elements of x per generated case: the interpreter runs programs one after another
BUDGET = {"interpreter": 1 << 16, "cuda": 1 << 22}

# The regression floor: shapes named by purpose, crossed with every dtype and layout.
SHAPES_EDGE = [(1, 1), (1, 256), (17, 257)]  # one element; N == BLOCK; the tutorial's N != BLOCK
SHAPES_NOALIGN = [(17, 255), (3, 1025), (2, 4097)]  # k*BLOCK +- 1
SHAPES_LARGE_N = [(4, 8192)]  # beyond the tutorial's N <= 4096
SHAPES_TUTORIAL = [(128, 257)]  # the tutorial's benchmark shape
# CUDA only: many short rows, past the 32768 rows where a library may switch to a multi-row
# kernel (Liger-Kernel's _block_rms_norm_* at >= 32768 rows of <= 256 columns)
SHAPES_GPU_TALL = [(32769, 97)]
# x, gamma and dy in different layouts in one call (properties.layouts.MIXED, MIXED_ALT): each
# dtype, these shapes, the two layouts in turn
SHAPES_MIXED = SHAPES_EDGE + SHAPES_NOALIGN
MIXED_LAYOUTS = (layouts.MIXED, layouts.MIXED_ALT)
CASE_LAYOUTS = strategies.LAYOUTS + MIXED_LAYOUTS
# CUDA only: one input stretched by an index-width layout (properties.layouts), small shapes
SHAPES_INDEX_WIDTH = [(3, 7), (4, 17), (5, 33)]
INDEX_WIDTH_DTYPES = (torch.bfloat16, torch.float32)
WIDE_INPUTS = {"x": 2, "gamma": 1, layouts.UPSTREAM: 2}  # what an index-width case stretches: name -> rank


@register_op
class RMSNormSpec(OpSpec):
    name = "rmsnorm"
    signature = "f(x[M, N], gamma[N], eps: float) -> y[M, N]"
    grad_checks = ("dx", "dgamma")

    def floor_cases(self, *, backend: str) -> list[Case]:
        shapes = SHAPES_EDGE + SHAPES_NOALIGN + SHAPES_LARGE_N + SHAPES_TUTORIAL
        cases = []
        i = 0
        for dtype in strategies.DTYPES:
            for layout in strategies.LAYOUTS:
                for m, n in shapes:
                    kind = values.ROW_KINDS[i % len(values.ROW_KINDS)]
                    eps = EPS_VALUES[i % len(EPS_VALUES)]
                    cases.append(self.case(m, n, dtype, layout, kind, eps, seed=1000 + i))
                    i += 1
            for m, n in SHAPES_MIXED:  # after the others: their ids and seeds stay as they were
                cases.append(self.case(m, n, dtype, MIXED_LAYOUTS[i % 2], values.ROW_KINDS[i % len(values.ROW_KINDS)],
                                       EPS_VALUES[i % len(EPS_VALUES)], seed=1000 + i))
                i += 1
        if backend == "cuda":
            for k, dtype in enumerate(strategies.DTYPES):  # each dtype once, layouts and kinds in turn
                for m, n in SHAPES_GPU_TALL:
                    cases.append(self.case(m, n, dtype, strategies.LAYOUTS[k % len(strategies.LAYOUTS)],
                                           values.ROW_KINDS[k % len(values.ROW_KINDS)], EPS_VALUES[k % len(EPS_VALUES)],
                                           seed=1800 + k))
            # index-width cases: x, gamma and dy stretched in turn so that an offset computed in
            # int32 passes 2**31 elements (a 1-D gamma has one stride: index_width_rows only)
            j = 0
            for li, layout in enumerate(layouts.INDEX_WIDTH_LAYOUTS):
                for k, (wide, rank) in enumerate(WIDE_INPUTS.items()):
                    if layout == layouts.INDEX_WIDTH_COLS and rank == 1:
                        continue
                    m, n = SHAPES_INDEX_WIDTH[j % len(SHAPES_INDEX_WIDTH)]
                    dtype = INDEX_WIDTH_DTYPES[(k + li) % len(INDEX_WIDTH_DTYPES)]
                    cases.append(self.case(m, n, dtype, layout, "normal", EPS_VALUES[j % len(EPS_VALUES)],
                                           seed=1900 + j, wide=wide))
                    j += 1
        return cases

    def case(self, m: int, n: int, dtype: torch.dtype, layout: str, kind: str, eps: float, seed: int,
             wide: str | None = None) -> Case:
        extra = {layouts.WIDE: wide} if wide is not None else {}
        return Case.of(
            self.name, M=m, N=n, dtype=strategies.dtype_name(dtype), layout=layout, **extra, values=kind, eps=eps,
            seed=seed,
        )

    def validate_case(self, case: Case) -> None:
        params = {
            "M": case_params.whole(1), "N": case_params.whole(1),
            "dtype": case_params.one_of(strategies.dtype_name(d) for d in strategies.DTYPES),
            "layout": case_params.one_of(CASE_LAYOUTS + layouts.INDEX_WIDTH_LAYOUTS),
        }
        if case.get(layouts.WIDE) is not None or case.get("layout") in layouts.INDEX_WIDTH_LAYOUTS:
            params[layouts.WIDE] = case_params.one_of(WIDE_INPUTS)
        params.update({"values": case_params.one_of(values.ROW_KINDS), "eps": case_params.positive_number(),
                       "seed": case_params.whole(0)})
        case_params.validate(case, params)
        m, n = int(case["M"]), int(case["N"])
        layouts.check_wide(case, {"x": (m, n), "gamma": (n,), layouts.UPSTREAM: (m, n)})

    def case_strategy(self, *, backend: str):
        budget = BUDGET.get(backend, BUDGET["interpreter"])

        @st.composite
        def cases(draw):
            n = draw(strategies.sizes(max_value=MAX_N, special=strategies.boundary_sizes(max_value=MAX_N)))
            m = draw(strategies.sizes(max_value=MAX_M, special=SPECIAL_M))
            m = max(1, min(m, budget // n))
            return self.case(
                m,
                n,
                draw(strategies.dtypes()),
                draw(st.sampled_from(CASE_LAYOUTS)),
                draw(st.sampled_from(values.ROW_KINDS)),
                draw(st.sampled_from(EPS_VALUES)),
                draw(strategies.seeds()),
            )

        return cases()

    def make_inputs(self, case: Case, device: str) -> OpInputs:
        m, n = int(case["M"]), int(case["N"])
        dtype = strategies.dtype_from_name(str(case["dtype"]))
        layout, wide = str(case["layout"]), case.get(layouts.WIDE)
        gen = values.generator(int(case["seed"]))
        x = values.rows(str(case["values"]), m, n, dtype, gen)
        gamma = values.gains(n, gen)
        dy = values.upstream((m, n), gen)
        return OpInputs(
            args=(
                layouts.place(x.to(dtype), layouts.for_input(layout, 0, "x", wide), device),
                layouts.place(gamma.to(dtype), layouts.for_input(layout, 1, "gamma", wide), device),
                float(case["eps"]),
            ),
            grad_wrt=(0, 1),
            upstream=layouts.place(dy.to(dtype), layouts.for_input(layout, -1, layouts.UPSTREAM, wide), device),
            dtype=dtype,
            layout=layout,
        )

    def oracle(self, inputs: OpInputs) -> dict[str, torch.Tensor]:
        x, gamma, eps = inputs.args
        dx, dgamma = rmsnorm_backward(x, gamma, inputs.upstream, eps)
        dx_terms, dgamma_terms = rmsnorm_backward_magnitudes(x, gamma, inputs.upstream, eps)
        return {
            "forward": rmsnorm_reference(x, gamma, eps),
            "dx": dx,
            "dx_magnitude": dx_terms,
            "dgamma": dgamma,
            "dgamma_magnitude": dgamma_terms,
        }

    def forward_meta(self, inputs: OpInputs) -> Meta:
        x = inputs.args[0]
        return Meta(tuple(x.shape), x.dtype)
