"""A case's inputs on the device it runs on."""

from __future__ import annotations

import torch

from harness.cases.case import Case
from harness.registry.opspec import OpInputs, OpSpec


def inputs_on(spec: OpSpec, case: Case, device: str) -> OpInputs:
    """The case's inputs on ``device``: their values drawn on the host (CPU generators, seeded),
    whatever torch's default device is, then placed (harness.ops.layouts.place), so that a
    value made without a device never lands where the inputs are not (tests/test_device_discipline.py)."""
    with torch.device("cpu"):
        return spec.make_inputs(case, device)
