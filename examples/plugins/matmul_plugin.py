"""Registering your own kernel for the ``matmul`` op (properties/ops/matmul.py): one decorated
function with the op's signature, here torch's addmm and activation in fp32.

    python -m harness verify --op matmul --plugin examples/plugins/matmul_plugin.py --select my_matmul --backend interpreter

Signature: ``f(a[M, K], b[K, N], bias[N], activation: str) -> y[M, N]`` with activation one of
none, relu, gelu_tanh; the harness takes da, db and dbias with autograd. A kernel whose fp32
products run in TF32 (a GPU's tl.dot default) declares it, or its fp32 cases fail:
``Contract(precision=("tfloat32", 2))``, one TF32 rounding of each operand.
"""

import torch
import torch.nn.functional as F

from harness import Contract, register_kernel

ACTIVATIONS = {"none": lambda z: z, "relu": torch.relu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}


@register_kernel("matmul", name="my_matmul", description="torch addmm + activation in fp32")
def my_matmul(a, b, bias, activation="none"):
    return ACTIVATIONS[activation](torch.addmm(bias.float(), a.float(), b.float())).to(a.dtype)


@register_kernel("matmul", name="my_matmul_tf32_allowed", contract=Contract(precision=("tfloat32", 2)),
                 description="the same, declared free to take fp32 products in TF32 on a GPU")
def my_matmul_tf32_allowed(a, b, bias, activation="none"):
    return my_matmul(a, b, bias, activation)
