"""Write a report file atomically: a reader never sees half a file, and only our file changes.

Every file written here is listed in the directory's manifest (reports/manifest.py); a file of
the same name that the harness did not write is refused, never overwritten. JSON is strict
(reports/jsonio.py: non-finite floats as "nan", "inf", "-inf"). Writing a source report removes
the rendered reports of the earlier sources, which `python -m harness report` renders again.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from reports import jsonio, manifest


def write_json(directory: str | Path, name: str, data: dict) -> Path:
    text = jsonio.dumps(data) + "\n"  # encode first: a value json cannot hold fails before any file changes
    if manifest.is_source(name):
        _refuse_foreign(directory, [name, *manifest.DERIVED])
        manifest.invalidate_derived(directory)
    return write_text(directory, name, text)


def _refuse_foreign(directory: str | Path, names) -> None:
    folder = Path(directory)
    if folder.is_dir():
        bad = manifest.foreign(folder, names)
        if bad:
            raise manifest.ForeignFileError(manifest.refusal(bad[0]))


def write_text(directory: str | Path, name: str, text: str, **provenance) -> Path:
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    _refuse_foreign(folder, [name])
    target = folder / name
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; reports are meant to be read and served
        manifest.record(folder, name, **provenance)  # listed first: a file of ours is never left unlisted
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
