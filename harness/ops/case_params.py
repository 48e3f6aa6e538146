"""Checks of a case's parameters, for the ops' ``validate_case`` (harness.registry.opspec.OpSpec).

An op lists its parameters with one check each; ``validate`` raises a UsageError that names
the case, the parameter, its value and what is allowed: a missing ``N``, ``M=-5`` or
``dtype=int8`` in a ``--case`` typed by hand is bad usage (exit 2), not a kernel failure.
"""

from __future__ import annotations

import math
from typing import Callable

from harness.cases.case import Case
from harness.errors import UsageError

Check = Callable[[object], str | None]  # None when the value is allowed, else what is allowed


def whole(minimum: int | None = None) -> Check:
    def check(value) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return "a whole number" + (f" >= {minimum}" if minimum is not None else "")
        if minimum is not None and value < minimum:
            return f"a whole number >= {minimum}"
        return None

    return check


def positive_number() -> Check:
    def check(value) -> str | None:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
        return None if ok else "a finite number > 0"

    return check


def one_of(choices) -> Check:
    allowed = tuple(choices)

    def check(value) -> str | None:
        return None if value in allowed else f"one of {', '.join(map(str, allowed))}"

    return check


def validate(case: Case, params: dict[str, Check]) -> None:
    given = dict(case.params)
    for name, check in params.items():
        if name not in given:
            raise UsageError(f"--case {case.id}: missing parameter {name}; a {case.op} case has "
                             f"{', '.join(params)}")
        allowed = check(given[name])
        if allowed is not None:
            raise UsageError(f"--case {case.id}: {name}={given[name]} is not allowed; {name} must be {allowed}")
    unknown = [k for k in given if k not in params]
    if unknown:
        raise UsageError(f"--case {case.id}: unknown parameter {unknown[0]}; a {case.op} case has {', '.join(params)}")
