"""``verify --baseline REV``: the base worktree, its kernels, and which head kernel pairs with which.

Pairs: the head kernel ``X`` with the base's ``X``; a head kernel with no base kernel of its
name is paired with a base kernel of the same op defined by a function of the same module
and name (``renamed``); what is left is ``added`` (head only) or ``removed`` (base only).
"""

from __future__ import annotations

import contextlib
import inspect
import os
from pathlib import Path
from typing import Iterator

from harness.baseline.load import BASE_PREFIX, ROOT_ENV, load_base_kernels
from harness.baseline.worktree import checkout, repo_root

AUTOLOAD = "harness.baseline.autoload"


def _where(entry) -> tuple[str, str, str]:
    fn = inspect.unwrap(entry.fn)
    module = (getattr(fn, "__module__", "") or "").rsplit(".", 1)[-1]
    return entry.op, module, getattr(fn, "__name__", "")


def pair(head: list, base: list) -> dict:
    """``{pairs: {head name: base entry name}, added, removed, renamed}``."""
    by_name = {(e.op, e.name.removeprefix(BASE_PREFIX)): e for e in base}
    by_where = {_where(e): e for e in base}
    pairs, added, renamed, used = {}, [], [], set()
    for e in head:
        match = by_name.get((e.op, e.name)) or by_where.get(_where(e))
        if match is None or match.name in used:
            added.append({"op": e.op, "name": e.name})
            continue
        used.add(match.name)
        pairs[(e.op, e.name)] = match.name
        old = match.name.removeprefix(BASE_PREFIX)
        if old != e.name:
            renamed.append({"op": e.op, "from": old, "to": e.name})
    removed = [{"op": e.op, "name": e.name.removeprefix(BASE_PREFIX)} for e in base if e.name not in used]
    return {"pairs": pairs, "added": added, "removed": removed, "renamed": renamed}


def project_root() -> Path:
    """The repository of the ``kernels`` package the registry loads (found without importing it)."""
    import importlib.util

    from harness.registry.discovery import KERNELS

    spec = importlib.util.find_spec(KERNELS)
    return repo_root(Path(spec.origin).resolve().parent)


@contextlib.contextmanager
def baseline(rev: str, head: list) -> Iterator[dict]:
    """The base of ``rev`` checked out and loaded (here and, through ROOT_ENV and AUTOLOAD, in
    every kernel process), for the block; yields :func:`pair`'s answer plus ``rev``/``commit``."""
    with checkout(rev, project_root()) as (tree, commit):
        previous = os.environ.get(ROOT_ENV)
        os.environ[ROOT_ENV] = str(tree)
        try:
            base = load_base_kernels(tree)
            yield dict(pair(head, base), rev=rev, commit=commit)
        finally:
            if previous is None:
                os.environ.pop(ROOT_ENV, None)
            else:
                os.environ[ROOT_ENV] = previous
