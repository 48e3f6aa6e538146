"""The Triton interpreter's bfloat16 made right: its casts of subnormal values, and its arithmetic.

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

bfloat16 arithmetic: the interpreter keeps a bf16 tensor as its raw bits in numpy uint16 and
applies numpy's operators to those integers, so ``a + b``, ``a * b``, ``tl.fma``, comparisons,
``tl.maximum``, ``tl.where`` on a comparison, ``tl.sum``/``tl.max``/``tl.min`` and ``tl.dot`` of
bf16 values give garbage (triton 3.9: ``[1.5, 3.0, -2.5, 0.5] + [0.25, -1, -4, 2]`` comes out
``[6.4e37, nan, -1.5e-38, 1.7e38]``), while a GPU computes them as the values they are. Here
each such operation on bf16 operands is done on their float32 values and, where the result is
bf16, rounded to nearest even (a GPU's bf16 arithmetic; its reductions and dots accumulate in
fp32 and round once at the end, as modelled). ``CORRECTED`` lists what is corrected; bf16
``tl.exp``/``tl.log`` and the other math functions are refused by Triton's own frontend on every
backend (they take fp32), so they need nothing. fp16 is numpy's IEEE half and needs nothing.
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


CORRECTED = ("fp32 -> bf16 casts of subnormals", "bf16 binary arithmetic and comparisons (+ - * / % min max)",
             "bf16 unary minus", "bf16 fma", "bf16 clamp", "bf16 sum/max/min reductions", "bf16 tl.dot")


def _f32(bits: np.ndarray) -> np.ndarray:
    """bf16 raw bits (uint16) as the float32 values they are."""
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def _bf16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to nearest even bf16, as raw bits (uint16); NaN stays NaN."""
    v = np.asarray(values, dtype=np.float32)
    bits = v.view(np.uint32).astype(np.uint64)
    out = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(v), np.uint16(0x7FC0), out)


def _is_bf16(handle) -> bool:
    import triton.language as tl

    return getattr(getattr(handle, "dtype", None), "scalar", None) == tl.bfloat16


def _bf16_arithmetic(interpreter) -> None:
    import triton.language as tl

    builder = interpreter.InterpreterBuilder
    handle = interpreter.TensorHandle
    binary, unary, fma, dot = builder.binary_op, builder.unary_op, builder.create_fma, builder.create_dot
    clampf = builder.create_clampf

    def as_f32(h):
        return handle(_f32(h.data), tl.float32) if _is_bf16(h) else h

    def back(out):  # a float32 result to bf16; a comparison's bool stays
        data = out.data
        return handle(_bf16(data), tl.bfloat16) if data.dtype == np.float32 else handle(data, out.dtype)

    def binary_op(self, lhs, rhs, op):
        if _is_bf16(lhs) and _is_bf16(rhs):
            return back(binary(self, as_f32(lhs), as_f32(rhs), op))
        return binary(self, lhs, rhs, op)

    def unary_op(self, arg, op):
        return back(unary(self, as_f32(arg), op)) if _is_bf16(arg) else unary(self, arg, op)

    def create_fma(self, x, y, z):
        if _is_bf16(z):
            return back(fma(self, as_f32(x), as_f32(y), as_f32(z)))
        return fma(self, x, y, z)

    def create_clampf(self, arg, lo, hi, propagate_nans):
        if _is_bf16(arg):
            return back(clampf(self, as_f32(arg), as_f32(lo), as_f32(hi), propagate_nans))
        return clampf(self, arg, lo, hi, propagate_nans)

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if _is_bf16(a) or _is_bf16(b):
            a, b = as_f32(a), as_f32(b)
            if _is_bf16(d):
                return back(dot(self, a, b, as_f32(d), input_precision, max_num_imprecise_acc))
        return dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.binary_op, builder.unary_op, builder.create_fma = binary_op, unary_op, create_fma
    builder.create_clampf, builder.create_dot = create_clampf, create_dot
    reduce_ops = interpreter.ReduceOps
    total, min_max = reduce_ops.sum, reduce_ops.min_max

    def sum_(self, input):
        if input.dtype.scalar != tl.bfloat16:
            return total(self, input)
        values = _f32(input.handle.data).sum(axis=self.axis, keepdims=self.keep_dims, dtype=np.float32)
        return self.to_tensor(_bf16(values), input.dtype)

    def min_max_(self, input, val_reduce_op, idx_reduce_op=None):
        data = input[0] if isinstance(input, tuple) else input
        if data.dtype.scalar != tl.bfloat16:
            return min_max(self, input, val_reduce_op, idx_reduce_op)
        values = _f32(data.handle.data)
        val = None if not val_reduce_op else self.to_tensor(
            _bf16(val_reduce_op(values, axis=self.axis, keepdims=self.keep_dims)), data.dtype)
        idx = None if not idx_reduce_op else self.to_tensor(
            idx_reduce_op(values, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        return (val, idx) if val is not None and idx is not None else (val if val is not None else idx)

    reduce_ops.sum, reduce_ops.min_max = sum_, min_max_


def install() -> bool:
    """Wrap the interpreter's cast and bf16 arithmetic once per process; False if this Triton has
    not the functions corrected (another version: nothing is installed)."""
    if _state["installed"]:
        return True
    try:
        from triton.runtime import interpreter
    except ImportError:  # pragma: no cover - no Triton
        return False
    convert = getattr(interpreter, "_convert_float", None)
    needed = ("binary_op", "unary_op", "create_fma", "create_clampf", "create_dot")
    if convert is None or not all(hasattr(interpreter.InterpreterBuilder, n) for n in needed) \
            or not hasattr(getattr(interpreter, "ReduceOps", None), "min_max"):
        return False
    interpreter._convert_float = _fixed(convert)
    _bf16_arithmetic(interpreter)
    _state["installed"] = True
    return True


def installed() -> bool:
    return _state["installed"]
