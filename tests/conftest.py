"""Tests run kernels through the Triton interpreter unless a GPU is visible.

TRITON_INTERPRET must be set before triton is first imported, hence at the top of conftest.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from harness.run.backend import current  # noqa: E402
from harness.registry.registry import load_project_kernels  # noqa: E402

load_project_kernels()


@pytest.fixture(scope="session")
def backend():
    return current()


@pytest.fixture(scope="session")
def device(backend):
    return backend.device
