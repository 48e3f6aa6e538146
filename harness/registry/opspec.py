"""What an op must provide to be verified: the interface the engine reads an op through.

An op is a math contract. Its spec builds inputs for a case, evaluates the float64 oracle,
and says which gradients exist. The engine does the rest, identically for every op.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

import torch

from harness.compare import tolerances
from harness.cases.case import Case
from vocabulary import Check

# the checks the runner (harness.run.runner) and the worker pool record for every op (vocabulary.names)
COMMON_CHECKS = tuple(Check)


@dataclasses.dataclass
class OpInputs:
    """Kernel arguments for one case and what the checks need to know about them."""

    args: tuple[Any, ...]  # positional arguments of the kernel, in the op's signature order
    grad_wrt: tuple[int, ...]  # positions in ``args`` whose gradients are checked
    # gradient of the loss with respect to the output; a tuple, one per output, for an op of several
    # outputs (OpSpec.output_checks)
    upstream: torch.Tensor | tuple[torch.Tensor, ...] | None
    dtype: torch.dtype  # the input dtype, whose rounding the error model counts in
    layout: str


def upstreams(upstream: Any) -> tuple:
    """The upstream gradient(s) as a tuple: one per output (a single tensor or None: one)."""
    return tuple(upstream) if isinstance(upstream, tuple) else (upstream,)


@dataclasses.dataclass(frozen=True)
class Meta:
    shape: tuple[int, ...]
    dtype: torch.dtype


class OpSpec(Protocol):
    """What the engine asks of an op (the suite, the runner, the registry). One implementer:
    harness.ops.derive.DeclaredOp, built from an OpDecl; the registry accepts nothing else, so
    every op has the declared ops' one error model (harness.compare.rounding)."""

    name: str
    signature: str  # human description of the kernel signature
    forward_check: str
    grad_checks: tuple[str, ...]  # one check name per position in OpInputs.grad_wrt
    # the value check of each output of an op whose kernel returns several (a tuple: the first is
    # forward_check); () where the kernel returns one tensor
    output_checks: tuple[str, ...]
    special_checks: tuple[str, ...]  # further names check_name() may return (special cases)

    def check_names(self) -> tuple[str, ...]:
        """Every name a record of this op's ``check`` field can carry (what a waiver may name)."""

    def input_names(self) -> tuple[str, ...]:
        """The kernel's arguments' names in order (what per-tensor contract fields name)."""

    def validate_case(self, case: Case) -> None:
        """Raise UsageError naming the parameter, its value and what is allowed when ``case`` is
        not a case of this op (a ``--case`` typed by hand): a bad id is bad usage, not a kernel
        failure (harness/ops/case_params.py has the checks)."""

    def floor_cases(self, *, backend: str) -> Sequence[Case]:
        """Cases that always run, before the generated ones (the regression floor)."""

    def case_strategy(self, *, backend: str):
        """A hypothesis strategy of Case objects."""

    def make_inputs(self, case: Case, device: str) -> OpInputs:
        """Deterministic inputs for ``case`` (all randomness from the case's seed)."""

    def oracle(self, inputs: OpInputs) -> dict[str, torch.Tensor]:
        """float64 values keyed by check name: the forward output and each gradient, and
        ``"<check>_magnitude"``: the rounding allowance of each (see harness.compare.allclose)."""

    def forward_meta(self, inputs: OpInputs) -> Meta:
        """Shape and dtype the forward output must have."""

    def forward_metas(self, inputs: OpInputs) -> list[Meta]:
        """Shape and dtype of each output, in the order of ``output_checks``."""

    def value_checks(self) -> tuple[str, ...]:
        """Every value check: each output's, then each gradient's."""

    def check_name(self, check: str, case: Case) -> str:
        """Name under which a value check is recorded; an op may single out special cases."""

    def tolerance(self, check: str, case: Case, dtype: torch.dtype) -> tolerances.Tolerance:
        """Allowed error for one value check."""
