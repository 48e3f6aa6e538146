"""Which part of a split run an item belongs to: the one rule of ``verify --shard I/K`` (generated
cases), ``mutate --shard I/K`` (mutants) and a kernel's suite split over workers.

A stable hash of the item's name (sha1, not Python's salted hash(), which changes between
processes) modulo the number of parts, so every CI job and every worker agrees on the split and
the parts together are exactly the whole.
"""

from __future__ import annotations

import hashlib

__all__ = ["in_part", "shard_of"]


def shard_of(name: str, count: int) -> int:
    """The part (0-based, of ``count``) that the item ``name`` (a case id, a mutant's name) belongs to."""
    return int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % count


def in_part(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether the item ``name`` belongs to part I of K (``shard``; None: the whole run)."""
    if shard is None:
        return True
    index, count = shard
    return shard_of(name, count) == index
