"""The kill cache: per backend, the case that killed each mutant last time, so that the next
campaign tries it first (harness.mutation.campaign.floor_hints). It only orders the floor.

Where a report directory has no kill cache yet (a fresh clone), the committed hints
``properties/mutants/kill_hints.json`` stand in: the same format, written by a full campaign
(``cp reports/out/kill_cache.json properties/mutants/kill_hints.json``) and reviewed like code. A
stale or wrong hint costs time only: a mutant whose hinted case no longer kills it runs the rest
of the floor as before.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harness.settings import PROJECT_ROOT
from reports import jsonio
from vocabulary import Backend

FORMAT = 1
COMMITTED = PROJECT_ROOT / "properties" / "mutants" / "kill_hints.json"


def empty() -> dict:
    return {"format": FORMAT, "backends": {}}


def _load(path: Path) -> dict | None:
    try:
        data = jsonio.loads(path.read_text())
        if data.get("format") == FORMAT and isinstance(data.get("backends"), dict):
            if not isinstance(data.get("memcheck", {}), dict):  # only orders work: a bad part is dropped
                del data["memcheck"]
            return data
    except (OSError, ValueError, AttributeError):
        pass
    print(f"mutate: warning: ignoring the unreadable kill cache {path}", file=sys.stderr)
    return None


def read(path: Path | None, committed: Path = COMMITTED) -> tuple[dict, str]:
    """The kill cache at ``path`` and where it came from ("report dir", "committed hints", "none");
    empty when it is off (None) or neither file can be read."""
    if path is None:
        return empty(), "none"
    if path.exists():
        data = _load(path)
        return (data, "report dir") if data is not None else (empty(), "none")
    if committed.exists():
        data = _load(committed)
        if data is not None:
            return data, "committed hints"
    return empty(), "none"


def keep(cache: dict, path: Path | None, backend: str, kept: list) -> None:
    """This campaign's kills in ``cache`` (its ``backends[backend]``; on a GPU also its memcheck
    kills, for the next GPU campaign's first looks), written to ``path``: the next campaign's
    case order. Nothing when the cache is off or nothing was kept."""
    from harness.mutation import campaign, memcheck_looks
    from reports import writer

    if path is None or not kept:
        return
    kills = cache.setdefault("backends", {}).setdefault(backend, {})
    for o in kept:
        kills.pop(o.entry.name, None)
    kills.update(campaign.observed_kills(kept))
    if backend == Backend.CUDA:
        by_memcheck = cache.setdefault("memcheck", {})
        for o in kept:
            by_memcheck.pop(o.entry.name, None)
        by_memcheck.update(memcheck_looks.memcheck_kills(kept))
    try:
        writer.write_json(path.parent, path.name, cache)
    except OSError as exc:
        print(f"mutate: warning: could not write the kill cache {path}: {exc}", file=sys.stderr)
