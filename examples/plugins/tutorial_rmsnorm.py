"""A correct outside RMSNorm kernel, registered through the public plugin API.

    python -m harness verify --plugin examples/plugins/tutorial_rmsnorm.py --select tutorial_rmsnorm
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
import _tutorial_impl  # noqa: E402

register_kernel(
    "rmsnorm",
    name="tutorial_rmsnorm",
    contract=Contract(dtypes=(torch.float32, torch.float16), max_n=4096, contiguous=True),
)(_tutorial_impl.make())
