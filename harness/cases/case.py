"""A case: one input configuration of one op, with a stable id and a one-line repro.

The id lists the op then its parameters in the op's order, e.g.
``rmsnorm:M=17,N=257,dtype=float16,layout=transposed,values=normal,eps=1e-06,seed=7``.
It is the pytest id, the report key and the ``--case`` argument that re-runs the case.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
from typing import Any

from harness.cases.command import absolute, console_words
from harness.errors import UsageError

Scalar = int | float | str


@dataclasses.dataclass(frozen=True)
class Case:
    op: str
    params: tuple[tuple[str, Scalar], ...]

    @classmethod
    def of(cls, op: str, **params: Scalar) -> "Case":
        for key, value in params.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise TypeError(f"case parameter {key}={value!r}: only int, float and str are allowed")
            if isinstance(value, str) and any(c in value for c in ",=: '\""):
                raise ValueError(f"case parameter {key}={value!r} must not contain , = : quotes or spaces")
        return cls(op, tuple(params.items()))

    def __getitem__(self, key: str) -> Scalar:
        for k, v in self.params:
            if k == key:
                return v
        raise KeyError(f"case {self.id} has no parameter {key!r}")

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    @property
    def id(self) -> str:
        return f"{self.op}:" + ",".join(f"{k}={_fmt(v)}" for k, v in self.params)

    def __str__(self) -> str:
        return self.id

    @classmethod
    def parse(cls, text: str) -> "Case":
        op, sep, rest = text.partition(":")
        if not sep or not op:
            raise UsageError(f"case id {text!r} must look like 'OP:key=value,key=value'")
        params = []
        for part in filter(None, rest.split(",")):
            key, eq, value = part.partition("=")
            if not eq or not key:
                raise UsageError(f"case id {text!r}: parameter {part!r} must look like key=value")
            params.append((key, _parse_scalar(value)))
        return cls(op, tuple(params))


def content_seed(op: str, params) -> int:
    """The seed of a floor case, from its other parameters (``params``: (name, value) pairs; a
    ``seed`` among them is ignored): a stable hash (sha1, not Python's salted hash()), so adding,
    removing or moving a floor case changes no other case's seed or id, and with them the kill
    cache's hints and the store's keys stay put."""
    text = f"{op}:" + ",".join(f"{k}={_fmt(v)}" for k, v in params if k != "seed")
    return _sha1(text, 8) % 1_000_000


def stable_pick(options, *key):
    """One of ``options``, chosen by a stable hash of ``key`` (its parts as text): the same key
    picks the same option in every process and whatever else is in the floor."""
    options = tuple(options)
    return options[_sha1("|".join(map(_fmt, key)), 12) % len(options)]


def stable_least(options, name, *key):
    """The one of ``options`` whose stable hash, with ``key``, is least (``name``: an option's
    text). Unlike stable_pick, options added later change the choice only where one of them is
    chosen: a floor that gains a shape keeps the other choices."""
    return min(options, key=lambda o: _sha1("|".join(map(_fmt, (*key, name(o)))), 12))


def _sha1(text: str, digits: int) -> int:
    return int(hashlib.sha1(text.encode()).hexdigest()[:digits], 16)


def _fmt(v: Scalar) -> str:
    return repr(v) if isinstance(v, float) else str(v)


def _parse_scalar(text: str) -> Scalar:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text


# A generated plugin file (absolute path) -> the options that made it, which choose the op and
# the kernel themselves (harness.kernelbench: --reference PROBLEM --candidate SOLUTION).
GENERATED_PLUGINS: dict[str, tuple[str, ...]] = {}


def repro_command(case: Case, *, kernel: str, backend: str, plugins: tuple[str, ...] = (), command: str = "verify",
                  options: list[str] | tuple[str, ...] = ()) -> str:
    """The one-line command that re-runs exactly this case for this kernel (``command``
    ``mutate`` for a mutant, which ``verify`` never runs; ``options``: more of its arguments),
    runnable as printed from any directory: the console script and every file by full paths."""
    made = [GENERATED_PLUGINS[absolute(p)] for p in plugins if absolute(p) in GENERATED_PLUGINS]
    words = [*console_words(), command]
    if not (made and command == "verify"):
        words += ["--op", case.op, "--select", kernel]
    words += ["--case", case.id, "--backend", backend]
    for p in plugins:
        if made and command == "verify" and absolute(p) in GENERATED_PLUGINS:
            words += GENERATED_PLUGINS[absolute(p)]
        else:
            words += ["--plugin", absolute(p)]
    return shlex.join([*words, *options])
