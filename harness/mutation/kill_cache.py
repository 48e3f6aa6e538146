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
