"""harness.compare.measure and harness.compare.message: the statistics of a comparison apart from
its words, joined by harness.compare.allclose.compare into the record.
Bug classes: a message that says other figures than the record holds (the two computed twice);
a statistic that only exists inside a message string."""

import dataclasses
import math

import torch

from harness.compare import message
from harness.compare.allclose import compare
from harness.compare.measure import Measurement, measure


def t(values):
    return torch.tensor(values, dtype=torch.float32)


ARGS = dict(atol=1e-5, rtol=1e-4, magnitude=None, terms_rtol=0.0, in_dtype=torch.float32)


def test_the_statistics_carry_every_figure_a_failure_message_names():
    m = measure(t([[1.0, 2.0], [3.0, float("nan")]]), t([[1.0, 2.5], [3.0, 4.0]]), **ARGS)
    assert not m.passed and (m.numel, m.mismatched, m.nonfinite_mismatched) == (4, 2, 1)
    assert m.worst_index == [1, 1] and math.isinf(m.err_ratio) and m.rounding_units is None  # the NaN is the worst
    assert math.isnan(m.worst_actual) and (m.worst_expected, m.max_abs_err) == (4.0, 0.5)
    assert all(not isinstance(getattr(m, f.name), str) for f in dataclasses.fields(Measurement))  # figures, no words
    text = message.describe(m, atol=1e-5, rtol=1e-4, terms_rtol=0.0, with_magnitude=False, in_dtype=torch.float32)
    assert text.splitlines()[:2] == ["Mismatched elements: 2 / 4 (50.0%)",
                                     "Non-finite mismatches: 1 (NaN/Inf where the oracle has none, or the reverse)"]
    assert "Worst element at index (1, 1): got nan, expected 4" in text
    assert "Greatest absolute difference: 0.5 (up to 1e-05 allowed)" in text


def test_the_record_is_the_measurement_and_its_description():
    actual, expected, allowance = t([1.0, 2.001, 3.0]), t([1.0, 2.0, 3.0]), t([1e-6, 1e-6, 1e-6])
    c = compare(actual, expected, atol=0.0, rtol=0.0, magnitude=allowance, terms_rtol=1.0)
    m = measure(actual, expected, **{**ARGS, "atol": 0.0, "rtol": 0.0, "magnitude": allowance, "terms_rtol": 1.0})
    assert (c.passed, c.mismatched, c.numel, c.worst_index, c.max_abs_err, c.err_ratio, c.rounding_units) == (
        m.passed, m.mismatched, m.numel, m.worst_index, m.max_abs_err, m.err_ratio, m.rounding_units)
    assert c.message == message.describe(m, atol=0.0, rtol=0.0, terms_rtol=1.0, with_magnitude=True,
                                         in_dtype=torch.float32)
    assert c.rounding_units == c.err_ratio  # |err| / allowed: the allowance is the rounding of the terms
    assert "a logic error" in c.message  # 1e-3 off against an allowance of 1e-6: past PRECISION_UNITS


def test_a_pass_is_one_line_and_the_attribute_checks_come_before_any_value():
    assert compare(t([1.0]), t([1.0]), atol=1e-5, rtol=1e-4).message == (
        "max abs 0, max rel 0, 0 of the allowed error")
    assert compare(t([1.0, 2.0]), t([1.0]), atol=1e-5, rtol=1e-4).message == "shape mismatch: got (2,), expected (1,)"
    assert compare([1.0], t([1.0]), atol=1e-5, rtol=1e-4).message == "expected a tensor, got list"
    assert compare(t([]), t([]), atol=1e-5, rtol=1e-4).message == message.EMPTY
