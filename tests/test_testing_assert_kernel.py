"""harness.testing.assert_kernel from a user's own test file, in a directory of its own."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

USER_TESTS = '''
import sys
sys.path.insert(0, {plugins!r})
import _tutorial_impl
import torch
from harness import Contract
from harness.testing import assert_kernel

# what the tutorial kernel promises (examples/plugins/tutorial_rmsnorm.py): other cases must be refused
CONTRACT = Contract(dtypes=(torch.float32, torch.float16), max_n=4096, contiguous=True)

my_rmsnorm = _tutorial_impl.make()
block_divisor = _tutorial_impl.make(div_by_block=True)
dgamma_mean = _tutorial_impl.make(dgamma_mean=True)


def test_correct():
    assert_kernel("rmsnorm", my_rmsnorm, max_examples=2, contract=CONTRACT)


def test_block_divisor():
    assert_kernel("rmsnorm", block_divisor, max_examples=2, contract=CONTRACT)


def test_dgamma_mean():
    assert_kernel("rmsnorm", dgamma_mean, max_examples=2, contract=CONTRACT)
'''


@pytest.mark.slow
def test_assert_kernel_fails_the_classic_bugs_with_readable_reasons(tmp_path):
    (tmp_path / "test_user_kernels.py").write_text(USER_TESTS.format(plugins=str(ROOT / "examples" / "plugins")))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider", "test_user_kernels.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout
    assert proc.returncode == 1, out[-4000:] + proc.stderr[-2000:]
    assert re.search(r"2 failed, 1 passed", out), out[-2000:]
    # each failure names its checks with the case id, the mismatch lines and a repro call
    block = out[out.index("_ test_block_divisor _"):]
    # the divisor is the block, not N: every N that is not the block itself fails the forward
    assert re.search(r"FAIL rmsnorm forward rmsnorm:M=\d+,N=\d+,dtype=float(32|16),layout=\w+,values=\w+,", block)
    assert "Mismatched elements:" in block and "Greatest absolute difference:" in block
    assert "repro: assert_kernel('rmsnorm', rmsnorm, seed=0, backend='interpreter', case='rmsnorm:" in block
    # the dgamma failure's own section ends at the next section header (another failure, the summary)
    dgamma = out[out.index("_ test_dgamma_mean _"):]
    dgamma = re.split(r"\n_{3,} test_block_divisor _{3,}\n|\n=+ (?:short test summary|warnings summary)", dgamma)[0]
    assert re.search(r"FAIL rmsnorm dgamma rmsnorm:M=\d+", dgamma)
    assert not re.search(r"FAIL rmsnorm (forward|dx) ", dgamma)  # only dgamma is wrong: the others must pass


def test_assert_kernel_without_the_interpreter_says_how(tmp_path):
    script = ("import triton\nfrom harness.testing import assert_kernel\n"
              "try:\n    assert_kernel('rmsnorm', lambda x, g, e: x, backend='interpreter')\n"
              "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "UsageError" in proc.stdout and "TRITON_INTERPRET=1" in proc.stdout, proc.stdout + proc.stderr


def test_assert_kernel_refuses_an_unknown_waiver():
    from harness import Contract, RegistryError
    from harness.testing import assert_kernel

    with pytest.raises(RegistryError, match="known checks: forward, dx, dgamma"):
        assert_kernel("rmsnorm", lambda x, g, e: x, contract=Contract(waive={"forwards": "typo"}))
