"""Two broken RMSNorm kernels registered as kernels under test: verify must fail both.

- tutorial_div_by_block: divides the sums of squares and of u*x by BLOCK instead of N
  (invisible when N is a power of two, 1.411458 instead of 0.9999995 on a row of 257 ones).
- tutorial_dgamma_mean: averages dgamma over the rows instead of summing (invisible at M = 1).
"""

import sys
from pathlib import Path

import torch

from harness import Contract, register_kernel

sys.path.insert(0, str(Path(__file__).parent))
import _tutorial_impl  # noqa: E402

CONTRACT = Contract(dtypes=(torch.float32, torch.float16), max_n=4096, contiguous=True)
register_kernel("rmsnorm", name="tutorial_div_by_block", contract=CONTRACT)(_tutorial_impl.make(div_by_block=True))
register_kernel("rmsnorm", name="tutorial_dgamma_mean", contract=CONTRACT)(_tutorial_impl.make(dgamma_mean=True))
