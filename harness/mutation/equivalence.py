"""The user's marks of equivalent library mutants (``mutate --mutate-module ... --equivalent FILE``).

A survivor of someone else's library cannot be marked in its source, so the marks live in a
file the user keeps, TOML or JSON, one entry per mutant::

    [[equivalent]]
    name = "gen.liger_kernel.ops.rms_norm._rms_norm_forward_kernel.other_zero_to_one.2"
    fingerprint = "3f1c0a9b27de"   # from mutation.json: mutants[].fingerprint
    reason = "a padding lane of W reads 1, but it is masked out of the store"

(JSON: ``{"equivalent": [{"name": ..., "fingerprint": ..., "reason": ...}]}``.) The fingerprint
is a digest of the mutated function's source (harness.mutation.library): when the library
changes that function, the mark no longer matches, is reported as stale and is not applied.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from harness.errors import UsageError

FIELDS = ("name", "fingerprint", "reason")


def load(path: Path) -> dict[str, dict]:
    """name -> mark; a UsageError (one line, exit 2) for a missing, unreadable or incomplete file."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"--equivalent {path}: cannot read it ({exc.strerror or exc}); give the path of a TOML or JSON file") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except ValueError as exc:
        raise UsageError(f"--equivalent {path}: not valid {'JSON' if path.suffix == '.json' else 'TOML'} "
                         f"({str(exc).splitlines()[0]})") from None
    marks = data.get("equivalent") if isinstance(data, dict) else None
    if not isinstance(marks, list):
        raise UsageError(f"--equivalent {path}: expected a list of marks under 'equivalent' ([[equivalent]] in TOML)")
    out = {}
    for i, mark in enumerate(marks):
        missing = [f for f in FIELDS if not isinstance(mark, dict) or not str(mark.get(f, "")).strip()]
        if missing:
            raise UsageError(f"--equivalent {path}: mark {i + 1} ({mark.get('name') if isinstance(mark, dict) else mark!r}) "
                             f"lacks {', '.join(missing)}; each mark needs a name, the mutant's fingerprint from "
                             "mutation.json and the reason it computes the same function")
        out[mark["name"]] = {k: str(v) if k in FIELDS else v for k, v in mark.items()}
    return out
