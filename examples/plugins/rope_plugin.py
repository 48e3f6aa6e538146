"""Registering your own RoPE kernel for the ``rope`` op (properties/ops/rope.py): one decorated
function with the op's signature, here plain torch in fp32 (the rotate-half formulation).

    python -m harness verify --op rope --plugin examples/plugins/rope_plugin.py --select my_rope --backend interpreter

Signature: ``f(x[B, S, H, D], cos[P, D/2], sin[P, D/2], offset: int, interleaved: int) -> y``,
positions offset .. offset + S - 1 of the tables; ``interleaved`` 0 pairs x[..., i] with
x[..., i + D/2], 1 pairs x[..., 2i] with x[..., 2i + 1]. The harness takes the gradient with
autograd. A kernel that supports one convention only says so in its contract
(``rule``), and the cases of the other are then outside it, not failures.
"""

import torch

from harness import Contract, register_kernel


def _rope(x, cos, sin, offset=0, interleaved=0):
    s = x.shape[1]
    c = cos.float()[offset : offset + s][None, :, None, :]
    sn = sin.float()[offset : offset + s][None, :, None, :]
    xf = x.float()
    x1, x2 = (xf[..., 0::2], xf[..., 1::2]) if interleaved else xf.chunk(2, dim=-1)
    y1, y2 = x1 * c - x2 * sn, x2 * c + x1 * sn
    y = torch.stack((y1, y2), dim=-1).flatten(-2) if interleaved else torch.cat((y1, y2), dim=-1)
    return y.to(x.dtype)


register_kernel("rope", name="my_rope", description="torch rotate-half RoPE in fp32")(_rope)


def _half_split_only(x, cos, sin, offset, interleaved):
    return "interleaved pairs are not supported (GPT-NeoX halves only)" if interleaved else None


register_kernel("rope", name="my_rope_neox", contract=Contract(rule=_half_split_only),
                description="the same, declared for the half-split convention only")(_rope)
