"""The error model of an op declared from a torch reference (harness.ops.reference): the identity
candidate (the reference itself, run in the case's dtype) passes, and a candidate off by more
than the model explains fails. Each rule is a class of formula, shown on a small synthetic op."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

import harness
from harness.registry.registry import Contract, KernelEntry
from harness.run.runner import run_case


def _failed(op, fn, cases) -> dict[str, list[str]]:
    """Per case id, the checks that failed."""
    entry = KernelEntry(op.name, fn.__name__, fn, Contract(), "kernel", "plugin", __file__)
    out = {}
    for c in cases:
        bad = [r.check for r in run_case(op, entry, c, backend="interpreter", device="cpu").records if not r.passed]
        if bad:
            out[c.id] = bad
    return out


def _cases(op, values: str | None = None, limit: int = 6, holding=None) -> list:
    """The op's floor cases of value kind ``values`` whose inputs hold ``holding`` (a float) somewhere."""
    cases = [c for c in op.floor_cases(backend="interpreter") if values is None or c["values"] == values]
    if holding is not None:
        cases = [c for c in cases if any(bool((a == holding).any()) for a in op.make_inputs(c, "cpu").args)]
    assert cases, values
    return cases[:limit]


# --- a NaN where the reference in the case's dtype gives NaN --------------------------------

def test_nan_is_accepted_where_the_reference_in_its_dtype_gives_nan_and_nowhere_else():
    """torch's fp32 gelu(+inf) is NaN, its float64 one +inf: the identity candidate passes on rows
    holding +inf; a NaN where the fp32 reference is finite, or where it is inf (softplus(+inf)),
    fails."""
    gelu = harness.from_reference(torch.nn.GELU(), (torch.randn(4, 32),), vary="auto", name="ref_gelu_inf",
                                  differentiable=False, dtypes=(torch.float32,), register=False)
    cases = _cases(gelu, "nonfinite", holding=float("inf"))
    assert bool(torch.isnan(F.gelu(torch.full((32,), float("inf")))).all()), "torch's fp32 gelu(+inf) is no longer NaN"

    def identity(x):
        return F.gelu(x)

    def nan_where_finite(x):  # NaN also at the first finite element of each row
        y = F.gelu(x).clone()
        first = torch.isfinite(x).float().argmax(-1, keepdim=True)
        return y.scatter(-1, first, float("nan"))

    assert _failed(gelu, identity, cases) == {}
    assert set(_failed(gelu, nan_where_finite, cases)) == {c.id for c in cases}

    softplus = harness.from_reference(torch.nn.Softplus(), (torch.randn(4, 32),), vary="auto", name="ref_softplus_inf",
                                      differentiable=False, dtypes=(torch.float32,), register=False)
    cases = _cases(softplus, "nonfinite", holding=float("inf"))

    def softplus_identity(x):
        return F.softplus(x)

    def nan_at_inf(x):  # NaN where the reference in fp32 gives +inf
        return torch.where(torch.isinf(x), float("nan"), F.softplus(x))

    assert _failed(softplus, softplus_identity, cases) == {}
    assert set(_failed(softplus, nan_at_inf, cases)) == {c.id for c in cases}


# --- a small difference of large terms: bounded by the terms its intermediate steps round ---

U32 = 2.0 ** -24


def _log_softmax_op():
    return harness.from_reference(lambda x: torch.log_softmax(x, -1), (torch.randn(4, 64),), vary="auto",
                                  name="ref_log_softmax_near_0", differentiable=False, dtypes=(torch.float32,),
                                  register=False)


def test_log_softmax_near_zero_is_bounded_by_its_sum_not_its_result():
    """A row with one dominant logit: log_softmax there is -log(1 + 2.5e-8), which fp32 computes
    as 0 (the sum of exps rounds to 1); the terms are that sum, about 1, read from the reference's
    own steps (amax, sub, exp, sum, log, sub). The identity candidate passes; one whose log of the
    sum is off by 4096 roundings of it fails."""
    op = _log_softmax_op()
    x = torch.randn(4, 64, dtype=torch.float64)
    x[:, 0] = 20.0  # exp(-20) * 63 ~ 1.3e-7: the sum of exps is 1 + 1.3e-7, its log below fp32's ulp at 1
    inputs = op.make_inputs(_cases(op, "normal", 1)[0], "cpu")
    import dataclasses

    inputs = dataclasses.replace(inputs, args=(x.to(torch.float32),))
    expected = op.oracle(inputs)
    name = op.oracle_forward_name(inputs)
    allowed = expected[f"{name}_magnitude"][:, 0]
    got = torch.log_softmax(x.to(torch.float32), -1).double()
    error = (got - expected[name])[:, 0].abs()
    assert bool((error > 0).all()) and bool((error <= allowed).all()), (error, allowed)
    assert bool((allowed < 4096 * U32).all()), allowed  # a bound of the sum's roundings, not of anything

    from harness.compare.allclose import compare

    def judged(y):  # the op's own rounding model with no atol/rtol floor: stricter than verify's, never wider
        return compare(y.to(torch.float32), expected[name].to(torch.float32), atol=0.0, rtol=0.0,
                       magnitude=expected[f"{name}_magnitude"], terms_rtol=1.0,
                       in_dtype=torch.float32).passed

    assert judged(got)
    off = got.clone()
    off[:, 0] -= 4096 * U32  # log(sum) off by 4096 roundings of the sum
    assert not judged(off)


def test_log_softmax_identity_passes_every_floor_case_and_a_short_sum_fails():
    op = _log_softmax_op()
    cases = [c for c in op.floor_cases(backend="interpreter") if c["layout"] == "contiguous"][:16]

    def identity(x):
        return torch.log_softmax(x, -1)

    def drops_last(x):  # the sum of exps misses the row's last element
        m = x.float().amax(-1, keepdim=True)
        s = torch.exp(x.float() - m)[..., :-1].sum(-1, keepdim=True)
        return (x.float() - m - torch.log(s)).to(x.dtype)

    assert _failed(op, identity, cases) == {}
    ordinary = [c for c in cases if c["values"] in ("normal", "mixed_scale", "tiny")]  # no element negligible
    assert ordinary and set(_failed(op, drops_last, ordinary)) == {c.id for c in ordinary}


# --- dims that must stay equal, where the reference does not check them ---------------------

def test_key_and_value_lengths_vary_together_where_the_reference_reads_past_its_inputs():
    """torch's CPU scaled_dot_product_attention takes a key length other than the value length
    without a word and reads past one of them: the padded-memory probe finds it, so the two
    lengths are one dim, and a case where they differ is outside the domain, not a crash."""
    from harness.reference import domain

    q, k, v = torch.randn(2, 2, 8, 16), torch.randn(2, 2, 12, 16), torch.randn(2, 2, 12, 16)
    op = harness.from_reference(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (q, k, v), vary="auto",
                                name="ref_sdpa_ties", differentiable=False, register=False)
    import re

    dims = {n: d.split(", ") for n, d in re.findall(r"(\w+)\[([^\]]*)\]", op.decl.signature)}
    assert dims["k"][2] == dims["v"][2] and dims["k"][2] in op.varying, op.decl.signature
    assert dims["q"][2] != dims["k"][2] and dims["q"][2] in op.varying, op.decl.signature  # the query's is free

    f64 = [t.double() for t in (q, k, v)]
    short_key = [f64[0], f64[1][:, :, :6].contiguous(), f64[2]]
    assert domain.rejection(F.scaled_dot_product_attention, short_key) is not None
    assert domain.rejection(F.scaled_dot_product_attention, f64) is None
    assert domain.rejection(torch.nn.functional.gelu, [f64[0]]) is None


def _judged(op, args: tuple, got: torch.Tensor) -> tuple[bool, torch.Tensor]:
    """Whether ``got`` passes op's forward check on ``args`` (fp32), and the allowed error."""
    import dataclasses

    from harness.compare.allclose import compare

    inputs = op.make_inputs(_cases(op, "normal", 1)[0], "cpu")
    inputs = dataclasses.replace(inputs, args=tuple(a.to(torch.float32) for a in args))
    expected = op.oracle(inputs)
    name = op.oracle_forward_name(inputs)
    # the rounding model alone (no atol/rtol floor): what the derived terms allow, nothing added
    cmp = compare(got.to(torch.float32), expected[name].to(torch.float32), atol=0.0, rtol=0.0,
                  magnitude=expected[f"{name}_magnitude"], terms_rtol=1.0, in_dtype=torch.float32)
    return cmp.passed, expected[f"{name}_magnitude"]


def test_a_margin_of_two_distances_is_bounded_by_the_distances():
    """max(d(a, p) - d(a, n) + margin, 0) with d(a, p) ~ d(a, n) ~ 10 and the result ~1e-3: fp32
    rounds the distances, about 10, and their difference keeps that error. The identity passes;
    a distance off by 4096 roundings fails."""
    loss = torch.nn.TripletMarginLoss(margin=1.0, reduction="none")
    gen = torch.Generator().manual_seed(3)
    a = torch.rand(16, 64, generator=gen, dtype=torch.float64)  # positive, as in KernelBench's problem
    w = 2.5 * torch.rand(16, 64, generator=gen, dtype=torch.float64)
    d = w.norm(dim=-1, keepdim=True)
    p, n = a + w, a + w * (1 + (1 - 1e-3) / d)  # d(a, n) = d(a, p) + 1 - 1e-3: the result is ~1e-3
    op = harness.from_reference(loss, (a.float(), p.float(), n.float()), vary="auto", name="ref_triplet_margin",
                                differentiable=False, dtypes=(torch.float32,), register=False)
    args = (a.float(), p.float(), n.float())
    got = loss(*args).double()
    assert bool((got > 1e-4).all()) and bool((got < 1e-2).all()), got
    ok, allowed = _judged(op, args, got)
    assert ok
    assert bool((allowed < 4096 * U32 * 10).all()), allowed

    def far(a, p, n):  # d(a, p) off by 4096 roundings of itself
        return loss(a, a + (p - a) * (1 + 4096 * U32), n).double()

    assert not _judged(op, args, far(*args))[0]


def test_attention_identity_passes_where_its_softmax_cancels_and_a_wrong_scale_fails():
    """scaled_dot_product_attention: the output sums p_j v_j with v of both signs, each p_j an exp
    of a score that fp32 rounds at the size of q.k; rounding the inputs alone allowed 1.03-1.92 x
    too little on these cases (mixed-scale and non-finite rows). The identity passes them; a
    softmax scale off by 2^-12 fails."""
    g = torch.Generator().manual_seed(0)
    q, k, v = [torch.rand(2, 2, 16, 32, generator=g) for _ in range(3)]
    op = harness.from_reference(lambda q, k, v: F.scaled_dot_product_attention(q, k, v), (q, k, v), vary="auto",
                                name="ref_sdpa_fwd", differentiable=False, dtypes=(torch.float32,), register=False)
    seeds = {"690281", "625940", "140082"}  # of the five such floor cases, the three smallest
    cases = [c for c in op.floor_cases(backend="interpreter") if c.id.rsplit("seed=", 1)[-1] in seeds]
    assert len(cases) == len(seeds), [c.id for c in cases]

    def identity(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def scale_off(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, scale=q.shape[-1] ** -0.5 * (1 + 2.0 ** -12))

    assert _failed(op, identity, cases) == {}
    assert set(_failed(op, scale_off, cases)) == {c.id for c in cases}


def test_a_sum_that_cancels_before_a_nonlinearity_is_bounded_by_the_sums_terms():
    """sigmoid(x @ w) where x @ w is a small difference of large products: a fp32 kernel that sums
    in another order loses the small part (here all of it, 0.75 of terms 2^25), and the sigmoid
    after it carries that rounding on to a result of ordinary size. The matmul step is moved by
    a rounding of its terms (|x| @ |w|), so the bound covers it; moving it by a rounding of its
    result (0.75) bounded the error 2e7 times too tightly (a conv, a GELU and a sigmoid:
    KernelBench level 2's 7_Conv3d_ReLU_LeakyReLU_GELU_Sigmoid_BiasAdd failed its own Model)."""
    from harness.compare import rounding
    from harness.reference import intermediates

    x = torch.tensor([[2.0 ** 24, 0.75, -2.0 ** 24], [1.0, 2.0, 3.0]], dtype=torch.float64)
    w = torch.ones(3, 1, dtype=torch.float64)

    def f(x, w):
        return torch.sigmoid(x @ w)

    exact = f(x, w)
    x32 = x.float()
    left_to_right = torch.sigmoid((x32[:, :1] + x32[:, 1:2]) + x32[:, 2:]).double()  # 2^24 + 0.75 rounds to 2^24
    err = (left_to_right - exact).abs()
    assert float(err[0, 0]) > 0.15 and float(err[1, 0]) < 1e-6
    u = rounding.unit_roundoff(torch.float32)
    terms = intermediates.terms(f, [x, w], u)
    assert float(u * terms[0, 0]) >= float(err[0, 0])  # the sum's terms, through the sigmoid's slope
    assert float(u * terms[1, 0]) < 1e-6  # no cancellation: a rounding of the result's size


def _relu_of_row_sum(x):
    s = x.sum(-1)
    if s.dtype != torch.float64:  # this dtype's own convention: an infinite sum is NaN (inf - inf in some order)
        s = torch.where(torch.isinf(s), torch.full_like(s, float("nan")), s)
    return torch.relu(-s)


def test_nan_is_accepted_where_an_infinite_input_reaches_and_the_reference_in_its_dtype_gives_nan():
    """float64 sums a row holding +inf to inf and the ReLU of its negation makes 0; the reference in
    fp32 (an fp32 convolution over an inf: KernelBench level 2's Conv3d-ReLU-...-Sigmoid) gives
    NaN there. NaN is accepted where an infinite input reaches the element and the reference in
    the case's dtype gives NaN; a NaN on a row no infinity reaches still fails."""
    op = harness.from_reference(_relu_of_row_sum, (torch.randn(8, 16),), vary={"x": ("M", "N")},
                                name="relu_of_row_sum_t", register=False, differentiable=False)
    cases = [c for c in op.floor_cases(backend="interpreter") if c["values"] == "nonfinite" and c["dtype"] == "float32"]
    reached = []
    for c in cases:
        x = op.make_inputs(c, "cpu").args[0]
        reached.append(bool((torch.isposinf(x).any(-1) & ~torch.isnan(x).any(-1)).any()))
    assert any(reached)  # a row whose inf the ReLU turns into 0

    def first_row_nan(x):
        out = _relu_of_row_sum(x).clone()
        clean = torch.isfinite(x).all(-1)
        out[clean.nonzero()[:1, 0]] = float("nan")
        return out

    assert _failed(op, _relu_of_row_sum, cases) == {}
    bad = _failed(op, first_row_nan, cases)
    assert bad and all("forward" in checks for checks in bad.values())


# --- a normalisation over axes other than the last -------------------------------------------

def _group_norm(x):
    return F.group_norm(x, 2)


def test_a_group_norm_over_channel_groups_is_recognised_as_a_normalisation():
    """A group norm of an NCHW tensor normalises each group of channels with its space: an offset
    per last-dim row changes it, an offset per sample does not. Probed so, it is a normalisation
    (its offset rows cases, the terms of the offset it cancels); a softmax over the channels is
    invariant to the shift only, no normalisation; an elementwise op to neither."""
    op = harness.from_reference(_group_norm, (torch.randn(2, 8, 4, 4),), name="group_norm_nchw_t", register=False,
                                dtypes=(torch.float32,))
    assert {"offset_rows", "constant_rows"} <= set(op.decl.value_kinds)
    instance = harness.from_reference(lambda x: F.instance_norm(x), (torch.randn(2, 3, 4, 4),), name="instance_t",
                                      register=False, dtypes=(torch.float32,))
    assert "offset_rows" in instance.decl.value_kinds
    for fn in (lambda x: torch.softmax(x, 1), torch.sigmoid):
        other = harness.from_reference(fn, (torch.randn(2, 6, 4, 4),), name="not_a_norm_t", register=False,
                                       dtypes=(torch.float32,))
        assert "offset_rows" not in other.decl.value_kinds and other.decl.shift_by_max == ()


def test_a_group_norm_over_channel_groups_passes_on_offset_rows_and_a_wrong_one_fails():
    """On inputs of a large offset (1e4 + N(0, 1) rows), fp32 cancels the offset with a rounding of
    it, which the terms of the cancelled offset bound (the reference's response to a relative move
    of its input, any axes); the identity passes there; a group norm over the wrong groups, and an
    output off by 1e-3 of itself, fail."""
    op = harness.from_reference(_group_norm, (torch.randn(2, 8, 4, 4),), name="group_norm_nchw_t", register=False,
                                dtypes=(torch.float32,))
    cases = [c for c in op.floor_cases(backend="interpreter") if c["values"] in ("offset_rows", "normal", "huge")]
    assert any(c["values"] == "offset_rows" for c in cases)

    def wrong_groups(x):
        return F.group_norm(x, 4)

    def off(x):
        y = F.group_norm(x, 2).clone()
        y.view(-1)[-1] += 1e-3 * y.view(-1)[-1].abs().clamp_min(1e-3)
        return y

    assert _failed(op, _group_norm, cases) == {}
    for wrong in (wrong_groups, off):
        bad = _failed(op, wrong, cases)
        assert set(bad) == {c.id for c in cases}, (wrong.__name__, bad)


class _LinearGroupNorm(torch.nn.Module):
    """A linear layer then a group norm of groups of two features (KernelBench level 2's
    Matmul-Swish-Sum-GroupNorm at sizes scaled to fit): the norm's input is an intermediate, no
    input of the reference, and a pair's normalisation is +-1 however the pair moves."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(16, 8)
        with torch.no_grad():
            self.linear.bias.copy_(1e3 * torch.randn(8))  # pairs far from 0: fp32 cancels their mean
        self.norm = torch.nn.GroupNorm(4, 8)

    def forward(self, x):
        return self.norm(self.linear(x))


def test_a_group_norm_inside_a_model_is_bounded_by_the_offset_it_cancels():
    """torch's group norm is one primitive operator; moved as one step it showed a rounding of its
    result (+-1) only, while fp32 forms x * rstd - mean * rstd and carries a rounding of |x| / std
    (a false alarm of the model itself at 36-1500 x). Its parts are steps now (the mean, the
    scale); the identity passes, and an output off by 1e-3 of itself still fails."""
    model = _LinearGroupNorm().double()
    op = harness.from_reference(model, (torch.rand(32, 16, dtype=torch.float64),), name="linear_group_norm_t", register=False,
                                differentiable=False, dtypes=(torch.float32,))
    cases = [c for c in op.floor_cases(backend="interpreter") if c["values"] in ("normal", "huge", "mixed_scale", "tiny")]

    def identity(x):
        return copy.deepcopy(model).to(x.dtype)(x)

    def off(x):
        y = identity(x).clone()
        y.view(-1)[-1] += 1e-3 * y.view(-1)[-1].abs().clamp_min(1e-3)
        return y

    assert cases and _failed(op, identity, cases) == {}
    assert set(_failed(op, off, cases)) == {c.id for c in cases}


def _softmax_channels(x):
    return torch.softmax(x, 1)


def test_a_softmax_over_the_channels_passes_and_one_over_the_wrong_dim_fails():
    """A softmax over dim 1 of an NCHW tensor: an offset per last-dim row changes it, so it is no
    last-dim softmax (no shift_by_max, whose rounding is taken on x - the last dim's max) and no
    normalisation; the identity passes on every floor case, and a softmax over the rows, or an
    output off by 1e-3 of itself, fails."""
    op = harness.from_reference(_softmax_channels, (torch.randn(2, 6, 4, 4),), name="softmax_channels_t",
                                register=False, dtypes=(torch.float32,))
    cases = [c for c in op.floor_cases(backend="interpreter") if c["values"] != "nonfinite"]

    def wrong_dim(x):
        return torch.softmax(x, -1)

    def off(x):
        y = torch.softmax(x, 1).clone()
        y.view(-1)[-1] += 1e-3 * y.view(-1)[-1].abs().clamp_min(1e-3)
        return y

    assert cases and _failed(op, _softmax_channels, op.floor_cases(backend="interpreter")) == {}
    for wrong in (wrong_dim, off):
        assert set(_failed(op, wrong, cases)) == {c.id for c in cases}, wrong.__name__


class _ConvSoftmaxChannels(torch.nn.Module):
    """A convolution, a softmax over its channels, a sigmoid, a scaling by 2 (KernelBench level 2's
    ConvTranspose-Softmax-...-Sigmoid problems at a small size), its weights fp32 values; channel
    1's weights those of channel 0 moved by 1e-4, so that their logits of inputs of 1e4 differ by
    about 1 and compete at every element."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        with torch.no_grad():
            w, b = self.conv.weight, self.conv.bias
            w[1] = w[0] + 1e-4 * torch.randn(w[0].shape, generator=torch.Generator().manual_seed(1))
            b[1] = b[0]

    def forward(self, x):
        return torch.sigmoid(torch.softmax(self.conv(x), 1)) * 2.0


def _conv_softmax_op():
    from harness.ops.reference import absolute

    model = _ConvSoftmaxChannels().double()
    op = harness.from_reference(model, (torch.randn(2, 4, 8, 8, dtype=torch.float64),), name="conv_softmax_channels_t",
                                register=False, differentiable=False, dtypes=(torch.float32,),
                                magnitude=absolute(model))
    return op, model


def _conv_softmax_inputs(seeds, scale: float) -> list[torch.Tensor]:
    return [scale * torch.randn(2, 4, 8, 8, generator=torch.Generator().manual_seed(s)) for s in seeds]


def test_a_softmax_over_a_convolutions_channels_is_bounded_by_each_logits_rounding():
    """A softmax over the channels of a convolution of large inputs: two channels' logits of 1e4
    compete at an element (p = 0.2 and 0.8, say), the convolution rounds each at its terms, and
    p moves with the difference of the two roundings (slopes +p(1 - p) and -p(1 - p)). Moved with
    one random sign per element, the two logits moved alike in half the samples and cancelled
    (KernelBench level 2's ConvTranspose2d-Softmax-BiasAdd-Scaling-Sigmoid: 0.045 u at an element
    where opposite signs give 44 u, fp32's error 65.7 u), and the reference failed on each seed at
    1e4; each channel is moved in a run of its own now. The reference itself in fp32 passes on
    every seed, at 1e4 and at 1; a softmax over the wrong dim, an exp of fp16 precision, and an
    output off by 1e-3 of its magnitude fail."""
    op, model = _conv_softmax_op()
    model32 = copy.deepcopy(model).float()

    def identity(x):
        return model32(x)

    def wrong_dim(x):
        return torch.sigmoid(torch.softmax(model32.conv(x), -1)) * 2.0

    def half_exp(x):  # the softmax's exp rounded to fp16's precision
        z = model32.conv(x)
        e = torch.exp(z - z.amax(1, keepdim=True)).half().float()
        return torch.sigmoid(e / e.sum(1, keepdim=True)) * 2.0

    def off(x):
        y = identity(x).clone()
        y[0, 3, 4, 4] += 1e-3 * y.abs().max()
        return y

    huge = _conv_softmax_inputs(range(8), 1e4)
    normal = _conv_softmax_inputs(range(100, 104), 1.0)
    with torch.no_grad():
        assert all(_judged(op, (x,), identity(x).double())[0] for x in huge + normal)
        for wrong in (wrong_dim, off, half_exp):
            assert not any(_judged(op, (x,), wrong(x).double())[0] for x in normal), wrong.__name__
        assert not any(_judged(op, (x,), wrong_dim(x).double())[0] for x in huge)


def test_a_steps_elements_are_moved_in_groups_one_per_element_an_output_element_depends_on():
    """The footprint of a step (which output elements one of its elements reaches, probed with a
    NaN): a softmax over 8 channels is moved in 8 groups, one channel each; a step followed by
    pointwise steps only in one group. Where two channels' logits of 1e4 compete (their weights
    nearly equal), one random sign per element moves both alike in half the samples and the
    convolution's step shows nearly nothing; moved a channel at a time, it shows both roundings,
    and fp32's own error is a few of them at most."""
    from harness.reference import intermediates

    op, model = _conv_softmax_op()
    x = _conv_softmax_inputs([0], 1e4)[0].double()
    u = U32
    counter = intermediates._Rounding(u, None, None)
    with torch.no_grad(), counter:
        plain = model(x)
    groups = [intermediates.groups_of(model, (x,), u, s, counter.shapes[s], plain) for s in range(counter.steps)]
    assert groups[0] == ([("lattice", (1, 8, 1, 1), (0, c, 0, 0)) for c in range(8)], 1)  # the convolution
    assert groups[-1] == ([("lattice", (1, 1, 1, 1), (0, 0, 0, 0))], 1)  # the scaling by 2
    with torch.no_grad():
        top2 = model.conv(x).topk(2, dim=1).indices
        competing = ((top2[:, 0] + top2[:, 1]) == 1) & ((top2[:, 0] - top2[:, 1]).abs() == 1)  # channels 0 and 1
        assert int(competing.sum()) >= 20
        gen = torch.Generator().manual_seed(0)
        sampled = torch.zeros_like(plain)
        for _ in range(intermediates.COPIES):  # the convolution's step, one random sign per element
            with intermediates._Rounding(u, 0, gen):
                sampled = torch.maximum(sampled, (model(x) - plain).abs() / u)
        grouped = torch.zeros_like(plain)
        for g in groups[0][0]:
            with intermediates._Rounding(u, 0, gen, g):
                grouped = grouped + ((model(x) - plain) / u) ** 2
        grouped = grouped.sqrt()
        err = (copy.deepcopy(model).float()(x.float()).double() - plain).abs() / u
    at = competing.unsqueeze(1).expand_as(plain).clone()
    at[:, 2:] = False  # the two competing channels' outputs
    assert bool((grouped[at] > 0.0).all())
    assert bool((sampled[at] < 0.01 * grouped[at]).any())  # cancelled in the sample
    terms = intermediates.terms(model, (x,), u)
    assert float((err[at] / terms[at]).max()) < 4.0, float((err[at] / terms[at]).max())
