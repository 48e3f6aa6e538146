"""A kernel that raises is shown at its own file:line: the deepest frame in the kernel's code,
past torch's, Triton's (the interpreter re-raising a @triton.jit body's error) and the harness's."""

import importlib.util

import pytest
import torch

from harness.run.kernel_host import error_of

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(X, Y, N, BLOCK: tl.constexpr):
    col = tl.arange(0, BLOCK)
    x = tl.load(X + col, col < N)
    tl.store(Y + col, x + tl.arange(0, 3), col < N)  # line 11: a range that is not a power of 2


def jit_kernel(x):
    y = torch.empty_like(x)
    _k[(1,)](x, y, x.numel(), BLOCK=8)
    return y


def torch_kernel(x):
    return torch.nn.functional.softmax(x, dim=5)  # line 21: inside torch, called from here


def harness_kernel(x):
    from harness.cases.case import Case
    return Case.parse("no case id")  # line 26: raised inside the harness
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "my_kernels.py"
    path.write_text(KERNEL)
    spec = importlib.util.spec_from_file_location("my_kernels_for_location", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


@pytest.mark.parametrize("name, line", [("jit_kernel", 11), ("torch_kernel", 21), ("harness_kernel", 26)])
def test_the_error_names_the_kernels_own_line(user_module, name, line):
    module, path = user_module
    with pytest.raises(Exception) as info:
        getattr(module, name)(torch.ones(4))
    error = error_of(info.value)
    assert error.where == f"{path}:{line}"
    assert error.describe().splitlines()[0].endswith(f"(at {path}:{line})")


def test_an_error_with_no_frame_in_user_code_has_no_location():
    from harness.cases.case import Case

    try:
        Case.parse("no case id")  # raised in the harness; the frame that called it is this test's
    except Exception as exc:
        exc.__traceback__ = exc.__traceback__.tb_next  # keep the harness's frames only
        error = error_of(exc)
    assert error.where is None and "(at " not in error.describe()
