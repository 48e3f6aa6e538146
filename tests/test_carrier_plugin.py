"""examples/plugins/_carrier.py: a third-party function narrowed to the inputs where it passes
verify, the carrier of a library campaign. Bug classes: a carrier that lets an out-of-contract
input reach the library (the contract check then fails it, or worse, the library writes), one
that rejects an integer target for its dtype, one that loses the wrapped function's identity
(the library campaign finds carriers through ``__wrapped__``)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "plugins"))
from _carrier import narrowed  # noqa: E402


def test_narrowed_rejects_before_calling_and_passes_the_rest():
    calls = []

    def library(x, target=None):
        calls.append(x)
        return x

    only_fp32 = narrowed(library, dtypes=(torch.float32,))
    with pytest.raises(TypeError, match="dtype torch.float16"):
        only_fp32(torch.zeros(2, 3, dtype=torch.float16))
    assert calls == []
    x = torch.zeros(2, 3)
    assert only_fp32(x, torch.zeros(2, dtype=torch.int64)) is x  # an integer target is not a float input
    assert only_fp32.__wrapped__ is library

    contiguous = narrowed(library, contiguous=True)
    with pytest.raises(ValueError, match="not contiguous"):
        contiguous(torch.zeros(3, 2).t())
    with pytest.raises(ValueError, match="argument 1 is not contiguous"):
        contiguous(x, torch.zeros(4, dtype=torch.int64)[::2])
    assert len(calls) == 1

    short_rows = narrowed(library, max_last_dim=4)
    with pytest.raises(ValueError, match="5 columns; this carrier takes at most 4"):
        short_rows(torch.zeros(2, 5))
    assert len(calls) == 1
    assert short_rows(torch.zeros(2, 4), torch.zeros(9, dtype=torch.int64)) is not None  # index tensors pass
    assert len(calls) == 2
