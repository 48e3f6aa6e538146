"""An op spec derived from a declaration (harness.registry.declare.OpDecl): everything but the math.

From the declared inputs the engine derives, identically for every declared op:
- floor cases: each symbolic dim in turn at 1, primes, powers of two and their neighbours,
  beyond 4096 (8191 in the interpreter; 16385, 32769 and 65537 on a GPU, past the sizes where
  libraries switch kernels), the other dims at 7; the largest
  input kept within the backend's element budget, the dims that count programs (all but the
  innermost of each input) within the backend's row limit; then the declaration's shapes by
  purpose (``OpDecl.floor_shapes``, on CUDA also ``floor_shapes_gpu``), as given. Crossed with every dtype; the
  layout, value kind and scalar values of each shape and dtype picked by their stable hash
  (harness.cases.case.stable_pick), then per dtype a case for each kind and layout the picks
  left out (``cover``); then each shape the picks left without it as the plain case, contiguous fp32 with rows ignored where the op has an ignorable index (what a
  kernel or library wrapper narrowed to contiguous fp32 takes); per dtype, where the op has two
  tensors of one declared shape, a case in each apart layout (harness.ops.apart: every tensor of
  the call its own row stride and storage offset, and memory orders that differ for each pair in
  some case) on a small shape with at least two elements along every dim. On CUDA also the index-width cases
  (harness.ops.layouts): each float input and the upstream gradient stretched in turn by
  index_width_rows and (2-D and more) index_width_cols, then each index tensor (a target) by
  index_width_rows, rows 3..5 and row lengths 7..33, bf16
  and fp32 in turn, the ``peaked`` value kind where the op has it (a max pass that reads a wrong
  address misses the peak and exp overflows), else its first; never drawn by the strategy;
- a hypothesis strategy drawing the same parameters from the same ranges;
- inputs: the case's value kind for ``Tensor(values="kind")``, each float input placed with
  the case's layout (harness.ops.layouts: every tensor input, index tensors too; under an
  index-width layout only the input the case's ``wide`` names, the others contiguous);
- the oracle: the float64 reference, gradients by float64 autograd through it (or the
  declaration's explicit backward), and per element the spread of both under the input
  dtype's rounding of the inputs and the upstream gradient (harness.compare.rounding; of
  x - row max for the inputs the op declares ``shift_by_max``), which the tolerance allows;
- case ids ``op:M=..,N=..,dtype=..,layout=..,[wide=..,]values=..,<scalars>,[ignored=..,]seed=..``; a
  floor case's seed is a hash of its other parameters (harness.cases.case.content_seed): nothing
  in a floor case depends on where it sits, so a floor that gains a shape keeps every other case
  and id; a generated case's seed is drawn.
A dim the declaration derives (``OpDecl.derived``: D = 2 R, a table of S + 40 rows) is computed
from the drawn ones wherever a case is made, and never drawn itself.
The derivation, by concern, each a module of functions of the op that ``DeclaredOp`` binds as
its methods (any of them can be overridden in a subclass, ``class MyOp(DeclaredOp)``):
``cases`` (size limits, a case and its id's parameters, their checks), ``floor``, ``draw`` (the
strategy), ``inputs``, ``shapes`` (dims read from a call), ``oracle``, ``tolerance``; ``op``
holds ``DeclaredOp``.
"""

from harness.errors import UsageError
from harness.ops.derive.cases import ALL_IGNORED, BUDGET, IGNORED, MAX_INNER, MAX_ROWS
from harness.ops.derive.floor import (APART_ELEMENTS, COMPANION, FLOOR_SIZES, FLOOR_SIZES_GPU, INDEX_WIDTH_DTYPES,
                                      INDEX_WIDTH_INNER, INDEX_WIDTH_ROWS, unique)
from harness.ops.derive.inputs import classes, off_masked, own_kind, place
from harness.ops.derive.op import DeclaredOp

__all__ = [
    "ALL_IGNORED", "APART_ELEMENTS", "BUDGET", "COMPANION", "DeclaredOp", "FLOOR_SIZES", "FLOOR_SIZES_GPU", "IGNORED",
    "INDEX_WIDTH_DTYPES", "INDEX_WIDTH_INNER", "INDEX_WIDTH_ROWS", "MAX_INNER", "MAX_ROWS", "UsageError", "classes",
    "off_masked", "own_kind", "place", "unique",
]
