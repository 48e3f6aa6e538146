"""harness.compare.allclose: tolerance arithmetic, non-finite values, shapes, diagnostics.
Bug classes: signed max-difference checks, NaN silently passing, off-by-one tolerance edges."""

import math

import pytest
import torch

from harness.compare.allclose import bitwise_equal, compare


def t(values):
    return torch.tensor(values, dtype=torch.float64)


def test_inside_tolerance_passes_and_reports_errors():
    c = compare(t([1.0, 2.0]), t([1.0, 2.0 + 1e-6]), atol=1e-5, rtol=0)
    assert c.passed and c.mismatched == 0
    assert math.isclose(c.max_abs_err, 1e-6, rel_tol=1e-6)
    assert c.err_ratio < 1


def test_allowed_error_is_atol_plus_rtol_times_expected():
    # allowed at 100 is 1e-5 + 1e-4 * 100 = 0.01001
    assert compare(t([100.01]), t([100.0]), atol=1e-5, rtol=1e-4).passed
    assert not compare(t([100.0102]), t([100.0]), atol=1e-5, rtol=1e-4).passed


def test_error_in_either_direction_fails():
    for sign in (+1, -1):
        c = compare(t([0.0, 1.0 + sign * 0.1]), t([0.0, 1.0]), atol=1e-5, rtol=1e-4)
        assert not c.passed and c.mismatched == 1 and c.worst_index == [1]


def test_diagnostics_name_count_index_and_allowed():
    c = compare(t([[0.0, 0.2], [0.0, 0.0]]), t([[0.0, 0.0], [0.0, 0.0]]), atol=1e-5, rtol=0)
    assert "Mismatched elements: 1 / 4 (25.0%)" in c.message
    assert "index (0, 1)" in c.message and "0.2" in c.message


def test_nan_must_match_nan():
    assert compare(t([math.nan, 1.0]), t([math.nan, 1.0]), atol=0, rtol=0).passed
    c = compare(t([math.nan, 1.0]), t([0.0, 1.0]), atol=1.0, rtol=1.0)
    assert not c.passed and c.nonfinite_mismatched == 1
    assert not compare(t([0.0]), t([math.nan]), atol=1.0, rtol=1.0).passed


def test_inf_must_match_sign():
    assert compare(t([math.inf]), t([math.inf]), atol=0, rtol=0).passed
    assert not compare(t([-math.inf]), t([math.inf]), atol=0, rtol=0).passed
    assert not compare(t([1e308]), t([math.inf]), atol=0, rtol=0).passed


def test_shape_mismatch_is_a_failed_record_not_an_exception():
    c = compare(t([1.0, 2.0]), t([[1.0, 2.0]]), atol=1, rtol=1)
    assert not c.passed and "shape mismatch" in c.message


def test_non_tensor_is_a_failed_record():
    c = compare(None, t([1.0]), atol=1, rtol=1)
    assert not c.passed and "NoneType" in c.message


def test_magnitude_widens_only_where_terms_cancel():
    expected = t([1e-3, 5.0])
    magnitude = t([1e4, 1.0])  # first element: two terms of 1e4 cancelled down to 1e-3
    actual = t([1e-3 + 0.05, 5.0 + 0.01])
    c = compare(actual, expected, atol=1e-5, rtol=1e-4, magnitude=magnitude, terms_rtol=1e-5)
    # 0.05 <= 1e-5 + 1e-4 * 1e-3 + 1e-5 * 1e4 = 0.1; 0.01 > 1e-5 + 5e-4 + 1e-5
    assert c.mismatched == 1 and c.worst_index == [1]


def test_magnitude_term_uses_terms_rtol_not_the_output_rtol():
    # a sum of terms of total size 1000 whose result is 10: one lost term of 4 must fail even
    # with bf16's rtol, because the terms were summed in fp32
    c = compare(t([14.0]), t([10.0]), atol=1.6e-2, rtol=1.6e-2, magnitude=t([1000.0]), terms_rtol=1e-5)
    assert not c.passed


def test_bitwise_equal_counts_differences_and_treats_nan_bits_as_equal():
    a = torch.tensor([1.0, math.nan, 3.0])
    assert bitwise_equal(a, a.clone()) == (True, 0)
    b = a.clone()
    b[2] = 3.0000002
    assert bitwise_equal(a, b) == (False, 1)


def test_a_finite_result_passes_for_a_reference_that_overflowed_within_its_allowance():
    """layer_norm's dx on a constant fp16 row against eps=1e-12 (run 35): the reference rounds to
    inf in fp16, the allowed error is 1.97e15 (the result is that ill-conditioned), and a kernel's
    62496 is within it; the same 62496 fails where the allowance is small (a true infinity)."""
    # atol, rtol: the rounding model's fp16 output terms in run 35's message (one subnormal step,
    # one fp16 eps), copied, not chosen; the allowance is the case's own 1.97e15
    got = torch.tensor([62496.0], dtype=torch.float16)
    want = torch.tensor([math.inf], dtype=torch.float64)
    ill = torch.tensor([1.97e15], dtype=torch.float64)
    assert compare(got, want, atol=6e-8, rtol=1e-3, magnitude=ill, terms_rtol=1.0).passed
    # an allowance that spans zero leaves the sign open: 0 and -62496 are within it too (the
    # torch fp32 layer_norm gave 0 for a dx whose float64 value, 80942, rounds to inf in fp16)
    assert compare(-got, want, atol=6e-8, rtol=1e-3, magnitude=ill, terms_rtol=1.0).passed
    assert compare(torch.zeros(1, dtype=torch.float16), want, atol=6e-8, rtol=1e-3, magnitude=ill, terms_rtol=1.0).passed
    # one that reaches past the largest fp16 but not across zero keeps the sign
    near = torch.tensor([7e4], dtype=torch.float64)
    assert compare(got, want, atol=6e-8, rtol=1e-3, magnitude=near, terms_rtol=1.0).passed
    assert not compare(-got, want, atol=6e-8, rtol=1e-3, magnitude=near, terms_rtol=1.0).passed  # wrong sign
    assert not compare(got, want, atol=6e-8, rtol=1e-3).passed
    saturated = torch.tensor([65504.0], dtype=torch.float16)  # inf clamped to the largest fp16
    assert not compare(saturated, want, atol=6e-8, rtol=1e-3, magnitude=torch.tensor([16.0], dtype=torch.float64),
                       terms_rtol=1.0).passed


def test_nan_ok_accepts_a_nan_only_where_marked_and_still_checks_the_value_elsewhere():
    # bug class: an accepted alternative that leaks (NaN passing anywhere) or replaces the value check
    # atol 1e-6 is any small allowance: the test is about which elements may be NaN, not about sizes
    e = torch.tensor([0.0, 0.0, 1.0])
    ok = torch.tensor([True, False, False])
    nan = float("nan")
    assert compare(torch.tensor([nan, 0.0, 1.0]), e, atol=1e-6, rtol=0.0, nan_ok=ok).passed
    assert compare(torch.tensor([0.0, 0.0, 1.0]), e, atol=1e-6, rtol=0.0, nan_ok=ok).passed  # the exact value too
    assert not compare(torch.tensor([0.0, nan, 1.0]), e, atol=1e-6, rtol=0.0, nan_ok=ok).passed  # not marked
    assert not compare(torch.tensor([0.5, 0.0, 1.0]), e, atol=1e-6, rtol=0.0, nan_ok=ok).passed  # a wrong value
    assert not compare(torch.tensor([float("inf"), 0.0, 1.0]), e, atol=1e-6, rtol=0.0, nan_ok=ok).passed  # inf is no NaN


# --- harness.compare.rounding: the backward-error spread -------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_spread_is_each_inputs_whole_rounding_moved_through_the_function_summed(dtype):
    # bug classes: a perturbation lost to rounding (1 + 2^-24 is 1 in fp32), a random size that
    # samples the conditioning instead of bounding it, and two inputs whose effects cancel.
    # y = a * sigmoid(a) * b at a = -46: d ln y / d ln a = 1 + a (1 - sigmoid(a)) = -45, d ln y / d ln b = 1,
    # so a whole rounding of a moves y by 45 u |y| and one of b by u |y|: the spread is 46 u |y|
    # on every element, whatever the signs drawn
    from harness.compare import rounding

    a = torch.full((64,), -46.0, dtype=torch.float64)
    b = torch.linspace(0.5, 3.0, 64, dtype=torch.float64)

    def evaluate(ts):
        x, z = ts
        return [x * torch.sigmoid(x) * z]

    u = rounding.unit_roundoff(dtype)
    base = evaluate([a, b])
    got = rounding.spread(evaluate, [a, b], u, base)[0] / (u * base[0].abs())
    # to first order; the second-order part is about (46 u) / 2 of it (9% in bf16, where 46 u = 0.18)
    assert torch.allclose(got, torch.full_like(got, 46.0), rtol=0.01 + 46 * u), got
