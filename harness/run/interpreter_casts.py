"""The Triton interpreter's float32 <-> bfloat16 casts, made right for subnormal values.

The interpreter converts between float32 and bfloat16 in numpy, taking each value's sign,
exponent and significand apart (``triton.runtime.interpreter._convert_float``). For a subnormal
input (exponent field 0: |x| < 2^-126) it computes a wrong exponent, so a tiny value comes out
near the smallest normal: in bf16, 4.9e-43 becomes 4.4e-39 and 1e-41 becomes 8.7e-39 (triton 3.9).
A GPU converts such values exactly (or flushes them to zero). A kernel that stores a softmax
probability exp(z - lse) of a logit far below its row's max in bf16 and multiplies it in a GEMM
(a fused linear cross-entropy's G = softmax - onehot, then dW = G^T x) then gets a gradient
element 1e4 times too large on the interpreter only: a false alarm on a correct kernel.

float32 and bfloat16 share their exponent field, so bfloat16 is float32's upper 16 bits: on the
subnormal elements the float32 -> bfloat16 cast is redone here as bit arithmetic, truncating
(what the interpreter does for ``.to(tl.bfloat16)``) or rounding to nearest even where Triton
asks for it. Every other element, and every other pair of types, keeps Triton's own result
(bfloat16 -> float32 is right for subnormals already). Installed in each process that runs kernels on the interpreter; if the
function is not there (another Triton version), nothing is installed and :func:`installed` says so.
"""

from __future__ import annotations

import functools

import numpy as np

_state = {"installed": False}


def _fixed(convert):
    @functools.wraps(convert)
    def convert_float(input, input_dtype, output_dtype, rounding_mode):
        out = convert(input, input_dtype, output_dtype, rounding_mode)
        import triton.language as tl

        if input_dtype == tl.float32 and output_dtype == tl.bfloat16:
            bits = np.frombuffer(np.ascontiguousarray(input).tobytes(), dtype=np.uint32).reshape(np.shape(input))
            subnormal = (bits & 0x7F800000) == 0
            if subnormal.any():
                if rounding_mode is None:  # a cast: truncation, as the interpreter does for normal values
                    kept = bits >> 16
                else:  # round to nearest, ties to even (no carry can reach the sign: |x| < 2^-126)
                    kept = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
                out = np.where(subnormal, kept.astype(np.uint16), out).astype(out.dtype)
        return out

    return convert_float


def install() -> bool:
    """Wrap the interpreter's cast once per process; False if this Triton has no such function."""
    if _state["installed"]:
        return True
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - no Triton
        return False
    convert = getattr(interpreter, "_convert_float", None)
    if convert is None:
        return False
    interpreter._convert_float = _fixed(convert)
    _state["installed"] = True
    return True


def installed() -> bool:
    return _state["installed"]
